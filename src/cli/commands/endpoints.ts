import type { Command } from 'commander';
import { pauseEndpoint, requireEndpoint, resumeEndpoint } from '../../admin/endpoint-state.js';
import { endpointHealth, endpointView } from '../../admin/endpoints.js';
import { resolveEndpoints } from '../../config/index.js';
import { channels } from '../../db/sql.js';
import { EXIT, ExitError, printJson, readConfig, withDatabase, type GlobalOptions } from '../context.js';
import { actor } from './admin.js';
import { parseReplayRequest, replayEndpoint } from '../../admin/replay.js';
import { ApiError } from '../../errors.js';

/**
 * `endpoints list|pause|resume`: the same view and the same actions as `GET /v1/endpoints` and
 * `POST /v1/endpoints/:name/pause|resume`, audited as the OS user (`cli:NAME`). This process runs no
 * workers, so the view's per-process fields (adaptive_limit, in_flight) are null.
 */
export function registerEndpoints(program: Command): void {
  const endpoints = program.command('endpoints').description('endpoints: their state and health; pause and resume');
  endpoints
    .command('list')
    .description('each configured endpoint as a JSON line: circuit, paused, held jobs, rate limit and recent health')
    .option('--window-minutes <n>', 'health over this many minutes, 1 to 10080', '60')
    .option('-c, --config <file>', 'config file')
    .action(async (o: GlobalOptions & { windowMinutes: string }) => {
      const minutes = Number(o.windowMinutes);
      if (!Number.isInteger(minutes) || minutes < 1 || minutes > 10_080)
        throw new ExitError(EXIT.usage, `--window-minutes: expected whole minutes from 1 to 10080, got ${JSON.stringify(o.windowMinutes)}`);
      const config = readConfig(o, { needSecrets: false });
      await withDatabase(config, async (db) => {
        for (const e of await endpointHealth(db.pool, resolveEndpoints(config), minutes)) if (!printJson(e)) break;
      });
    });
  for (const [action, fn, help] of [
    ['pause', pauseEndpoint, 'pause an endpoint: no process delivers to it until resumed; its jobs wait, pending'],
    ['resume', resumeEndpoint, 'resume a paused endpoint; an open circuit is probed at once'],
  ] as const) {
    endpoints
      .command(action)
      .description(`${help} (prints its view, with "changed": false if there was nothing to do)`)
      .argument('<name>', 'endpoint name')
      .option('-c, --config <file>', 'config file')
      .action(async (name: string, o: GlobalOptions) => {
        const config = readConfig(o, { needSecrets: false }); // nothing here delivers
        const list = resolveEndpoints(config);
        requireEndpoint(list, name); // an unknown name fails before a database is opened (or an embedded one started)
        await withDatabase(config, async (db, log) => {
          const ctx = { pool: db.pool, endpoints: list, channel: channels(config.database.schema).endpoints, log };
          const { changed } = await fn(ctx, name, actor());
          printJson({ ...(await endpointView(db.pool, list, name)), changed });
        });
      });
  }
}

/**
 * `endpoints replay NAME --since 2h [--until T] [--status dead|all] [--dry-run]`: the same as
 * `POST /v1/endpoints/:name/replay` (docs/operations.md#replaying-an-endpoint), audited as the OS
 * user. Bad input exits 2 naming the flag, before a database is opened; an unknown endpoint exits 1.
 */
export function registerEndpointReplay(program: Command): void {
  const endpoints = program.commands.find((c) => c.name() === 'endpoints') ?? program.command('endpoints');
  endpoints
    .command('replay')
    .description("send an endpoint's window again: its dead (or all finished) jobs re-queued, same ids; events it has no job for get one")
    .argument('<name>', 'endpoint name')
    .requiredOption('--since <time>', 'start of the window: a duration ago ("2h") or an RFC 3339 time')
    .option('--until <time>', 'end of the window (default now): a duration ago or an RFC 3339 time')
    .option('--status <status>', 'dead: dead jobs only (default); all: completed ones too')
    .option('--dry-run', 'print the counts; change nothing')
    .option('--idempotency-key <key>', 'the same key again (within 24 h) prints the first answer and changes nothing')
    .option('-c, --config <file>', 'config file')
    .action(
      async (
        name: string,
        o: GlobalOptions & { since: string; until?: string; status?: string; dryRun?: boolean; idempotencyKey?: string },
      ) => {
        const req = { since: o.since, until: o.until, status: o.status, dry_run: o.dryRun === true, idempotency_key: o.idempotencyKey };
        try {
          parseReplayRequest(req);
        } catch (err) {
          const field = err instanceof ApiError ? err.details?.['field'] : undefined;
          if (typeof field === 'string')
            throw new ExitError(
              EXIT.usage,
              `--${field.replaceAll('_', '-')}${err instanceof Error ? err.message.slice(field.length) : ''}`,
            );
          throw err;
        }
        const config = readConfig(o, { needSecrets: false }); // nothing here delivers
        const list = resolveEndpoints(config);
        requireEndpoint(list, name);
        await withDatabase(config, async (db, log) => {
          const ctx = {
            pool: db.pool,
            endpoints: list,
            purge: config.jobs.job_purge,
            maxAttempts: config.jobs.max_attempts,
            jobsChannel: channels(config.database.schema).jobs,
            log,
          };
          printJson(await replayEndpoint(ctx, name, req, actor()));
        });
      },
    );
}
