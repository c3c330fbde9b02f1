import { NO_WORKER_WARNING, workerSeen } from '../../admin/processes.js';
import { resolveEndpoints } from '../../config/index.js';
import { channels } from '../../db/sql.js';
import { notifyInput } from '../../notify/input.js';
import { notifyNow } from '../../notify/notify.js';
import { readCatalogOnce } from '../../topics/catalog.js';
import { reportMismatch } from '../../topics/check.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, readArg, type CliIo } from '../io.js';

interface NotifyOptions extends GlobalOptions {
  data: string;
  recipients?: string;
  idempotencyKey?: string;
  orderingKey?: string;
}

export async function notify(io: CliIo, topic: string, o: NotifyOptions): Promise<void> {
  // It writes the jobs; the workers that send them sign with their own config's secrets.
  const config = readConfig(io, o, { needSecrets: false });
  const text = await readArg(io, o.data);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new ExitError(EXIT.usage, `--data: not valid JSON: ${(err as Error).message}`);
  }
  const parsed = notifyInput.safeParse({
    topic,
    data,
    ...(o.recipients
      ? {
          recipients: o.recipients
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        }
      : {}),
    ...(o.idempotencyKey ? { idempotency_key: o.idempotencyKey } : {}),
    // Given empty, it is refused (naming the field) rather than dropped.
    ...(o.orderingKey !== undefined ? { ordering_key: o.orderingKey } : {}),
  });
  if (!parsed.success) {
    throw new ExitError(EXIT.usage, parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('\n'));
  }
  await withDatabase(io, config, async (db, log) => {
    const endpoints = resolveEndpoints(config);
    // Checked against the catalog as the server checks it (docs/operations.md#topic-catalog).
    const catalog = await readCatalogOnce(db.pool, config);
    // A refusal (unknown recipient, idempotency conflict) becomes its exit code in main.
    const ans = await notifyNow(db.pool, parsed.data, 'cli', {
      endpoints: () => endpoints,
      webhooksEnabled: () => config.notify.webhook.enabled,
      maxAttempts: config.jobs.max_attempts,
      jobsChannel: channels(config.database.schema).jobs,
      log,
      topics: () => catalog,
      onSchemaMismatch: (name, mode, problems) => reportMismatch(log, name, mode, problems),
    });
    // Nothing running to deliver it is the usual first-run surprise: said on stderr and in the answer, as POST /v1/notify does.
    const seen = await workerSeen(db.pool).catch(() => true);
    if (!seen) io.stderr.write(`warning: ${NO_WORKER_WARNING}\n`);
    // The answer as POST /v1/notify gives it: replayed when an idempotency key given before answers again.
    printJson(io, { ...ans.body, replayed: ans.status === 200, ...(seen ? {} : { warning: NO_WORKER_WARNING }) });
  });
}
