import type { Command } from 'commander';
import type pg from 'pg';
import { requireEndpoint } from '../../admin/params.js';
import { endpointHealth, endpointView } from '../../endpoint-state/health.js';
import { pauseEndpoint, resumeEndpoint } from '../../endpoint-state/operator.js';
import type { Config, Endpoint } from '../../config/index.js';
import { resolveEndpoints } from '../../config/index.js';
import type { Queryable } from '../../db/pool.js';
import { createEndpointInput, updateEndpointInput } from '../../endpoints/input.js';
import {
  createStoredEndpoint,
  deleteStoredEndpoint,
  codecOf,
  readStoredEndpoints,
  rotateStoredSecret,
  toEndpoint,
  updateStoredEndpoint,
  type SecretCodec,
  type StoreContext,
} from '../../endpoints/store.js';
import { fromZod } from '../../http/errors.js';
import { encryptionKeyMissing, loadSecretBox } from '../../crypto/keys.js';
import { SsrfGuard } from '../../net/ssrf.js';
import { coerceError } from '../../errors.js';
import type { z } from 'zod';
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
        for (const e of await endpointHealth(db.pool, await allEndpoints(db.pool, config), minutes)) if (!printJson(e)) break;
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
        await withDatabase(config, async (db, log) => {
          const list = await allEndpoints(db.pool, config);
          requireEndpoint(list, name);
          const ctx = { pool: db.pool, endpoints: list, channel: channels(config.database.schema).endpoints, log };
          const { changed } = await fn(ctx, name, actor());
          printJson({ ...(await endpointView(db.pool, list, name)), changed });
        });
      });
  }
  registerStoredEndpoints(endpoints);
}

/** Stored secrets are not opened for a view: the CLI shows no secret, and needs no key to list. */
const NO_SECRETS: SecretCodec = { seal: () => '', open: () => '' };

/** The config file's endpoints, then those stored through the API (as every process sees them). */
export async function allEndpoints(db: Queryable, config: Config): Promise<Endpoint[]> {
  const fromConfig = resolveEndpoints(config);
  const names = new Set(fromConfig.map((e) => e.name));
  const stored = (await readStoredEndpoints(db)).filter((r) => !names.has(r.name)).map((r) => toEndpoint(r, config, NO_SECRETS));
  return [...fromConfig, ...stored];
}

interface EndpointFlags extends GlobalOptions {
  url?: string;
  topics?: string;
  scheme?: string;
  header?: string[];
  timeout?: string;
  maxInFlight?: string;
  rateLimit?: string;
  description?: string;
  secret?: string;
  disabled?: boolean;
  enabled?: boolean;
}

/** The flags as the API's body, so both refuse the same input with the same message (exit 2). */
function bodyOf(o: EndpointFlags): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (o.url !== undefined) body['url'] = o.url;
  if (o.topics !== undefined)
    body['topics'] = o.topics
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== '');
  if (o.scheme !== undefined) body['scheme'] = o.scheme;
  if (o.header !== undefined) {
    const headers: Record<string, string> = {};
    for (const h of o.header) {
      const at = h.indexOf('=');
      if (at <= 0) throw new ExitError(EXIT.usage, `--header: expected NAME=VALUE, got ${JSON.stringify(h.slice(0, 100))}`);
      headers[h.slice(0, at)] = h.slice(at + 1);
    }
    body['headers'] = headers;
  }
  if (o.timeout !== undefined) body['timeout'] = o.timeout;
  if (o.maxInFlight !== undefined) body['max_in_flight'] = o.maxInFlight;
  if (o.rateLimit !== undefined) body['rate_limit'] = o.rateLimit === '' || o.rateLimit === 'none' ? null : o.rateLimit;
  if (o.description !== undefined) body['description'] = o.description;
  if (o.disabled) body['enabled'] = false;
  if (o.enabled) body['enabled'] = true;
  return body;
}

function parseFlags<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const r = schema.safeParse(body);
  if (!r.success) throw new ExitError(EXIT.usage, fromZod(r.error, 'body').message);
  return r.data;
}

function withEndpointFlags(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'http(s) URL the POST goes to')
    .option('--topics <list>', 'comma-separated whitelist: exact topics, "prefix.*" or "*"')
    .option('--scheme <scheme>', 'acw (X-ACW-* headers) or standard (Standard Webhooks)')
    .option('--header <name=value>', 'an extra request header (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--timeout <duration>', 'per-attempt timeout, 100ms to 60s')
    .option('--max-in-flight <n>', 'concurrent deliveries per process')
    .option('--rate-limit <rate>', '"20/s" or "600/min" across all processes ("none" clears it)')
    .option('--description <text>', 'what it is for')
    .option('-c, --config <file>', 'config file');
}

async function storeOf(config: Config, pool: pg.Pool, needKey: boolean): Promise<StoreContext> {
  // The key as the service finds it: configured, or the embedded server's key file.
  const codec = needKey ? codecOf(await loadSecretBox(config)) : null;
  if (!codec && needKey) throw new ExitError(EXIT.failure, encryptionKeyMissing().message);
  const guard = new SsrfGuard({ allowNetworks: config.notify.webhook.allow_networks });
  return {
    pool,
    codec: codec ?? NO_SECRETS,
    configNames: new Set(resolveEndpoints(config).map((e) => e.name)),
    channel: channels(config.database.schema).endpointDefs,
    serviceTopics: config.notify.webhook.service_endpoints.topics,
    tombstoneMs: config.jobs.job_purge.dead_retention,
    checkUrl: async (url) => {
      try {
        await guard.checkUrlResolved(url, 'url');
      } catch (err) {
        throw new ExitError(EXIT.usage, coerceError(err).message);
      }
    },
  };
}

/** `endpoints add|show|update|remove`: the endpoints API's create, read, change and delete, from the shell. */
function registerStoredEndpoints(endpoints: Command): void {
  withEndpointFlags(
    endpoints
      .command('add')
      .description('create an endpoint (stored in the database, live in every process within a second); prints it with its secret, once')
      .argument('<name>', 'endpoint name'),
  )
    .option('--secret <secret>', 'use this signing secret instead of a generated one')
    .option('--disabled', 'create it disabled (its jobs wait)')
    .action(async (name: string, o: EndpointFlags) => {
      const input = parseFlags(createEndpointInput, { name, ...bodyOf(o), ...(o.secret !== undefined ? { secret: o.secret } : {}) });
      const config = readConfig(o, { needSecrets: false });
      const total = config.notify.webhook.max_in_flight_total;
      if (input.max_in_flight !== undefined && input.max_in_flight > total) {
        throw new ExitError(
          EXIT.usage,
          `max_in_flight: must not exceed notify.webhook.max_in_flight_total (${total}), got ${input.max_in_flight}`,
        );
      }
      await withDatabase(config, async (db) => {
        const { secret } = await createStoredEndpoint(await storeOf(config, db.pool, true), input, { name: actor(), role: 'admin' });
        printJson({ ...(await endpointView(db.pool, await allEndpoints(db.pool, config), name)), secret });
      });
    });

  endpoints
    .command('show')
    .description("one endpoint's view: definition, circuit, pause, held jobs and recent health (never its secret)")
    .argument('<name>', 'endpoint name')
    .option('-c, --config <file>', 'config file')
    .action(async (name: string, o: GlobalOptions) => {
      const config = readConfig(o, { needSecrets: false });
      await withDatabase(config, async (db) => {
        printJson(await endpointView(db.pool, await allEndpoints(db.pool, config), name));
      });
    });

  withEndpointFlags(
    endpoints
      .command('update')
      .description('change a stored endpoint (config endpoints: edit the file)')
      .argument('<name>', 'endpoint name'),
  )
    .option('--disabled', 'disable it (its jobs wait)')
    .option('--enabled', 'enable it')
    .action(async (name: string, o: EndpointFlags) => {
      if (o.disabled && o.enabled) throw new ExitError(EXIT.usage, '--enabled and --disabled: give one of them');
      const patch = parseFlags(updateEndpointInput, bodyOf(o));
      const config = readConfig(o, { needSecrets: false });
      await withDatabase(config, async (db) => {
        await updateStoredEndpoint(await storeOf(config, db.pool, true), name, patch, { name: actor(), role: 'admin' });
        printJson(await endpointView(db.pool, await allEndpoints(db.pool, config), name));
      });
    });

  endpoints
    .command('rotate-secret')
    .description('give a stored endpoint a new secret; the old one keeps signing beside it for the overlap (prints the new one, once)')
    .argument('<name>', 'endpoint name')
    .option('--overlap <duration>', 'how long both secrets sign, 1m to 720h', '24h')
    .option('--secret <secret>', 'use this secret instead of a generated one')
    .option('-c, --config <file>', 'config file')
    .action(async (name: string, o: GlobalOptions & { overlap: string; secret?: string }) => {
      const config = readConfig(o, { needSecrets: false });
      await withDatabase(config, async (db) => {
        try {
          const out = await rotateStoredSecret(
            await storeOf(config, db.pool, true),
            name,
            { overlap: o.overlap, ...(o.secret !== undefined ? { secret: o.secret } : {}) },
            { name: actor(), role: 'admin' },
            config,
          );
          printJson({ name, ...out });
        } catch (err) {
          // A bad --overlap or --secret is a usage error, with the API's message.
          if (err instanceof ApiError && err.status === 400) throw new ExitError(EXIT.usage, err.message);
          throw err;
        }
      });
    });

  endpoints
    .command('remove')
    .description('delete a stored endpoint; refused while it has pending jobs unless --force, which cancels them')
    .argument('<name>', 'endpoint name')
    .option('--force', 'cancel its pending jobs')
    .option('-c, --config <file>', 'config file')
    .action(async (name: string, o: GlobalOptions & { force?: boolean }) => {
      const config = readConfig(o, { needSecrets: false });
      await withDatabase(config, async (db) => {
        const { cancelled_jobs } = await deleteStoredEndpoint(await storeOf(config, db.pool, false), name, o.force === true, {
          name: actor(),
          role: 'admin',
        });
        printJson({ name, deleted: true, cancelled_jobs });
      });
    });
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
        await withDatabase(config, async (db, log) => {
          const list = await allEndpoints(db.pool, config);
          requireEndpoint(list, name);
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
