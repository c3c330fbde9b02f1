import type { Command } from 'commander';
import {
  addUser,
  cancelJob,
  followAlerts,
  getJob,
  listJobs,
  listUsers,
  readAlerts,
  redriveJobs,
  retryJob,
  revokeUser,
} from '../../admin/index.js';
import { parseDuration, ROLES } from '../../config/index.js';
import { channels } from '../../db/sql.js';
import type { Logger } from '../../log.js';
import { EXIT, ExitError, printJson, readConfig, withDatabase, type GlobalOptions } from '../context.js';
import { watchForStop } from '../stop.js';
import { ALERT_ACTIONS, parseAlertActions } from '../../admin/alerts.js';

/** Operator commands act as this principal in audit_log: the OS user running them. */
export function actor(): string {
  return `cli:${process.env.USER ?? process.env.LOGNAME ?? 'unknown'}`;
}

/** Run an admin operation against the configured database (its refusals become exit codes in main). */
async function admin<T>(
  o: GlobalOptions,
  fn: (ctx: { pool: import('pg').Pool; url: string; jobsChannel: string; alertsChannel: string; log: Logger }) => Promise<T>,
): Promise<T> {
  const config = readConfig(o, { needSecrets: false }); // none of these delivers
  return withDatabase(config, async (db, log) => {
    const ch = channels(config.database.schema);
    return fn({ pool: db.pool, url: db.url, jobsChannel: ch.jobs, alertsChannel: ch.alerts, log });
  });
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new ExitError(EXIT.usage, `${name}: expected a positive whole number, got ${JSON.stringify(v)}`);
  return n;
}

export function registerJobs(program: Command): void {
  const jobs = program.command('jobs').description('inspect and act on jobs');
  jobs
    .command('list')
    .description('list jobs, newest first, as JSON lines')
    .option('--status <status>', 'pending|running|completed|dead|cancelled')
    .option('--type <type>', 'job type, e.g. webhook.deliver')
    .option('--topic <topic>', 'event topic')
    .option('--endpoint <name>', 'endpoint name')
    .option('--event-id <uuid>', 'event id')
    .option('--limit <n>', 'at most this many', '50')
    .option('-c, --config <file>', 'config file')
    .action(
      async (o: GlobalOptions & { status?: string; type?: string; topic?: string; endpoint?: string; eventId?: string; limit: string }) => {
        const limit = positiveInt(o.limit, '--limit');
        await admin(o, async ({ pool }) => {
          const page = await listJobs(pool, {
            status: o.status,
            type: o.type,
            topic: o.topic,
            endpoint: o.endpoint,
            event_id: o.eventId,
            limit,
          });
          for (const j of page.items) if (!printJson(j)) break;
        });
      },
    );
  jobs
    .command('show')
    .description('one job with its delivery attempts')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(async (id: string, o: GlobalOptions) => {
      await admin(o, async ({ pool }) => {
        const job = await getJob(pool, id);
        if (!job) throw new ExitError(EXIT.failure, `no job ${id}`);
        printJson(job);
      });
    });
  jobs
    .command('retry')
    .description('send a dead, completed or cancelled job again (a new attempt series)')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(async (id: string, o: GlobalOptions) => {
      await admin(o, async ({ pool, jobsChannel }) => printJson(await retryJob(pool, id, actor(), jobsChannel)));
    });
  jobs
    .command('cancel')
    .description('cancel a pending job')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(async (id: string, o: GlobalOptions) => {
      await admin(o, async ({ pool }) => printJson(await cancelJob(pool, id, actor())));
    });
  jobs
    .command('redrive')
    .description('re-queue dead jobs matching the filter; prints {"count": N} (with --dry-run: how many match)')
    .option('--status <status>', 'only "dead", the default')
    .option('--since <duration>', 'only jobs that went dead within this long, e.g. 1h')
    .option('--topic <topic>', 'event topic')
    .option('--endpoint <name>', 'endpoint name')
    .option('--dry-run', 'count only; change nothing')
    .option('-c, --config <file>', 'config file')
    .action(async (o: GlobalOptions & { status?: string; since?: string; topic?: string; endpoint?: string; dryRun?: boolean }) => {
      if (o.status !== undefined && o.status !== 'dead')
        throw new ExitError(EXIT.usage, `--status: only "dead" jobs can be redriven, got ${JSON.stringify(o.status)}`);
      let since: Date | undefined;
      if (o.since !== undefined) {
        try {
          since = new Date(Date.now() - parseDuration(o.since));
        } catch (err) {
          throw new ExitError(EXIT.usage, `--since: ${(err as Error).message}`);
        }
      }
      await admin(o, async ({ pool, jobsChannel }) => {
        const filter = { status: 'dead' as const, topic: o.topic, endpoint: o.endpoint, since };
        // One JSON line, as POST /v1/jobs/redrive answers: {count}, matched (--dry-run) or re-queued.
        printJson(await redriveJobs(pool, o.dryRun ? { ...filter, dry_run: true } : filter, actor(), jobsChannel));
      });
    });
}

export function registerUsers(program: Command): void {
  const users = program.command('users').description('API users and their tokens');
  users
    .command('add')
    .description('create a user; prints its token once (only a hash is stored)')
    .argument('<name>', 'user name')
    .requiredOption('--role <role>', ROLES.join(', '))
    .option('-c, --config <file>', 'config file')
    .action(async (name: string, o: GlobalOptions & { role: string }) => {
      await admin(o, async ({ pool }) => printJson(await addUser(pool, { name, role: o.role }, actor())));
    });
  users
    .command('list')
    .description('list users (never tokens)')
    .option('-c, --config <file>', 'config file')
    .action(async (o: GlobalOptions) => {
      await admin(o, async ({ pool }) => {
        for (const u of await listUsers(pool)) if (!printJson(u)) break;
      });
    });
  users
    .command('revoke')
    .description('revoke a user: its token is refused at once')
    .argument('<name>', 'user name')
    .option('-c, --config <file>', 'config file')
    .action(async (name: string, o: GlobalOptions) => {
      await admin(o, async ({ pool }) => printJson(await revokeUser(pool, name, actor())));
    });
}

/** `alerts` prints the newest 50; `alerts --follow` starts like `tail -f`, with the last 10. */
const LIST_DEFAULT = 50;
const TAIL_DEFAULT = 10;
const collect = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];

export function registerAlerts(program: Command): void {
  program
    .command('alerts')
    .description('alerts as JSON lines: the newest ones, or --follow to print the last 10 and keep listening (like tail -f)')
    .option('--follow', 'print the last alerts (10, or --limit), then each new one as it happens, until interrupted')
    .option('--since <id>', 'start after this alert id instead (replays every alert after it, with or without --follow)')
    .option(
      '--limit <n>',
      `how many past alerts: without --follow the newest ${LIST_DEFAULT} (or the first after --since; max 1000), with --follow the last ${TAIL_DEFAULT}`,
    )
    .option(
      '--action <action>',
      `only these alerts, listed and followed; repeat it or separate with commas (${ALERT_ACTIONS.join(', ')})`,
      collect,
    )
    .option('-c, --config <file>', 'config file')
    .action(async (o: GlobalOptions & { follow?: boolean; since?: string; limit?: string; action?: string[] }) => {
      const since = o.since === undefined ? undefined : Number(o.since);
      if (since !== undefined && (!Number.isInteger(since) || since < 0))
        throw new ExitError(EXIT.usage, `--since: expected an alert id, got ${JSON.stringify(o.since)}`);
      const limit = o.limit === undefined ? undefined : positiveInt(o.limit, '--limit');
      if (limit !== undefined && limit > 1000) throw new ExitError(EXIT.usage, `--limit: at most 1000, got ${limit}`);
      // Refused (exit 2, naming --action) before the database is opened.
      const action = o.action === undefined ? undefined : parseAlertActions(o.action, '--action');
      await admin(o, async ({ pool, url, alertsChannel, log }) => {
        if (!o.follow) {
          for (const a of await readAlerts(pool, { sinceId: since, limit: limit ?? LIST_DEFAULT, action })) if (!printJson(a)) break;
          return;
        }
        // SIGINT/SIGTERM, the parent exiting (npx) or a closed stdout (`| head`) end the follow,
        // and the database (an embedded server included) is closed as after any command.
        const stop = watchForStop({ onStdoutClosed: true });
        try {
          // Its log (stderr, warn and up) says when the database is lost and while it retries.
          await followAlerts({
            pool,
            url,
            channel: alertsChannel,
            sinceId: since,
            backlog: limit ?? TAIL_DEFAULT,
            action,
            signal: stop.signal,
            onAlert: (a) => void printJson(a),
            log,
          });
        } finally {
          stop.dispose();
        }
      });
    });
}
