import type pg from 'pg';
import type { z } from 'zod';
import { requireEndpoint } from '../../admin/params.js';
import { endpointHealth, endpointView } from '../../endpoint-state/health.js';
import { pauseEndpoint, resumeEndpoint } from '../../endpoint-state/operator.js';
import { parseReplayRequest, replayEndpoint } from '../../admin/replay.js';
import type { Config, Endpoint } from '../../config/index.js';
import { resolveEndpoints } from '../../config/index.js';
import { encryptionKeyMissing, loadSecretBox } from '../../crypto/keys.js';
import type { Queryable } from '../../db/pool.js';
import { channels } from '../../db/sql.js';
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
import { ApiError, coerceError } from '../../errors.js';
import { fromZod } from '../../http/errors.js';
import { SsrfGuard } from '../../net/ssrf.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, type CliIo } from '../io.js';
import { forPeople, printTable, type JsonOption } from '../table.js';
import { ENDPOINT_HEADERS, endpointHint, endpointRow } from '../views.js';
import { readSecretFile } from '../secret-file.js';
import { actor } from './admin.js';

/**
 * `endpoints list|pause|resume`: the same view and the same actions as `GET /v1/endpoints` and
 * `POST /v1/endpoints/:name/pause|resume`, audited as the OS user (`cli:NAME`). This process runs no
 * workers, so the view's per-process fields (adaptive_limit, in_flight) are null.
 */
export async function endpointsList(io: CliIo, o: GlobalOptions & JsonOption & { windowMinutes: string }): Promise<void> {
  const minutes = Number(o.windowMinutes);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 10_080)
    throw new ExitError(EXIT.usage, `--window-minutes: expected whole minutes from 1 to 10080, got ${JSON.stringify(o.windowMinutes)}`);
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const list = await endpointHealth(db.pool, await allEndpoints(db.pool, config), minutes);
    if (forPeople(io, o)) printTable(io, ENDPOINT_HEADERS, list.map(endpointRow), 'no endpoints');
    else for (const e of list) if (!printJson(io, e)) break;
  });
}

async function pauseOrResume(io: CliIo, fn: typeof pauseEndpoint, name: string, o: GlobalOptions): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false }); // nothing here delivers
  await withDatabase(io, config, async (db, log) => {
    const list = await allEndpoints(db.pool, config);
    requireEndpoint(list, name);
    const ctx = { pool: db.pool, endpoints: list, channel: channels(config.database.schema).endpoints, log };
    const { changed } = await fn(ctx, name, actor(io));
    printJson(io, { ...(await endpointView(db.pool, list, name)), changed });
  });
}

export const endpointsPause = (io: CliIo, name: string, o: GlobalOptions): Promise<void> => pauseOrResume(io, pauseEndpoint, name, o);
export const endpointsResume = (io: CliIo, name: string, o: GlobalOptions): Promise<void> => pauseOrResume(io, resumeEndpoint, name, o);

/** Stored secrets are not opened for a view: the CLI shows no secret, and needs no key to list. */
const NO_SECRETS: SecretCodec = { seal: () => '', open: () => '' };

/** The config file's endpoints, then those stored through the API (as every process sees them). */
async function allEndpoints(db: Queryable, config: Config): Promise<Endpoint[]> {
  const fromConfig = resolveEndpoints(config);
  const names = new Set(fromConfig.map((e) => e.name));
  const stored = (await readStoredEndpoints(db)).filter((r) => !names.has(r.name)).map((r) => toEndpoint(r, config, NO_SECRETS));
  return [...fromConfig, ...stored];
}

interface EndpointFlags extends GlobalOptions {
  url?: string;
  topics?: string;
  scheme?: string;
  ordering?: string;
  propagateTrace?: boolean;
  propagateTraceDefault?: boolean;
  header?: string[];
  timeout?: string;
  maxInFlight?: string;
  rateLimit?: string;
  description?: string;
  secret?: string;
  secretFile?: string;
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
  if (o.ordering !== undefined) body['ordering'] = o.ordering;
  if (o.propagateTraceDefault) {
    if (o.propagateTrace !== undefined)
      throw new ExitError(EXIT.usage, '--propagate-trace-default: not with --propagate-trace or --no-propagate-trace');
    body['propagate_trace'] = null;
  } else if (o.propagateTrace !== undefined) body['propagate_trace'] = o.propagateTrace;
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

/**
 * The secret an operator chose, if any: `--secret-file` (its first line), or `--secret`, which
 * works but is warned about, since `ps` and the shell history show it. Neither: one is generated.
 */
function chosenSecret(io: CliIo, o: { secret?: string; secretFile?: string }): string | undefined {
  if (o.secret !== undefined && o.secretFile !== undefined) throw new ExitError(EXIT.usage, '--secret and --secret-file: give one of them');
  if (o.secretFile !== undefined) return readSecretFile(o.secretFile)[0]!.trim();
  if (o.secret !== undefined) {
    io.stderr.write(
      'warning: --secret shows the secret to every user of this host (ps) and in your shell history; use --secret-file FILE\n',
    );
  }
  return o.secret;
}

/** `endpoints add|show|update|remove`: the endpoints API's create, read, change and delete, from the shell. */
export async function endpointsAdd(io: CliIo, name: string, o: EndpointFlags): Promise<void> {
  const chosen = chosenSecret(io, o);
  const input = parseFlags(createEndpointInput, { name, ...bodyOf(o), ...(chosen !== undefined ? { secret: chosen } : {}) });
  const config = readConfig(io, o, { needSecrets: false });
  const total = config.notify.webhook.max_in_flight_total;
  if (input.max_in_flight !== undefined && input.max_in_flight > total) {
    throw new ExitError(
      EXIT.usage,
      `max_in_flight: must not exceed notify.webhook.max_in_flight_total (${total}), got ${input.max_in_flight}`,
    );
  }
  await withDatabase(io, config, async (db) => {
    const { secret } = await createStoredEndpoint(await storeOf(config, db.pool, true), input, { name: actor(io), role: 'admin' });
    printJson(io, { ...(await endpointView(db.pool, await allEndpoints(db.pool, config), name)), secret });
  });
}

export async function endpointsShow(io: CliIo, name: string, o: GlobalOptions): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const view = await endpointView(db.pool, await allEndpoints(db.pool, config), name);
    printJson(io, view);
    // At a terminal, a line on what to do next when the endpoint is not healthy (stderr: the JSON stays whole).
    const hint = io.isTTY === true ? endpointHint(view) : undefined;
    if (hint !== undefined) io.stderr.write(`${hint}\n`);
  });
}

export async function endpointsUpdate(io: CliIo, name: string, o: EndpointFlags): Promise<void> {
  if (o.disabled && o.enabled) throw new ExitError(EXIT.usage, '--enabled and --disabled: give one of them');
  const patch = parseFlags(updateEndpointInput, bodyOf(o));
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    await updateStoredEndpoint(await storeOf(config, db.pool, true), name, patch, { name: actor(io), role: 'admin' });
    printJson(io, await endpointView(db.pool, await allEndpoints(db.pool, config), name));
  });
}

export async function endpointsRotateSecret(
  io: CliIo,
  name: string,
  o: GlobalOptions & { overlap: string; secret?: string; secretFile?: string },
): Promise<void> {
  const secret = chosenSecret(io, o);
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    try {
      const out = await rotateStoredSecret(
        await storeOf(config, db.pool, true),
        name,
        { overlap: o.overlap, ...(secret !== undefined ? { secret } : {}) },
        { name: actor(io), role: 'admin' },
        config,
      );
      printJson(io, { name, ...out });
    } catch (err) {
      // A bad --overlap or --secret is a usage error, with the API's message.
      if (err instanceof ApiError && err.status === 400) throw new ExitError(EXIT.usage, err.message);
      throw err;
    }
  });
}

export async function endpointsRemove(io: CliIo, name: string, o: GlobalOptions & { force?: boolean }): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const { cancelled_jobs } = await deleteStoredEndpoint(await storeOf(config, db.pool, false), name, o.force === true, {
      name: actor(io),
      role: 'admin',
    });
    printJson(io, { name, deleted: true, cancelled_jobs });
  });
}

interface ReplayOptions extends GlobalOptions {
  since: string;
  until?: string;
  status?: string;
  dryRun?: boolean;
  idempotencyKey?: string;
}

/**
 * `endpoints replay NAME --since 2h [--until T] [--status dead|all] [--dry-run]`: the same as
 * `POST /v1/endpoints/:name/replay` (docs/operations.md#replaying-an-endpoint), audited as the OS
 * user. Bad input exits 2 naming the flag, before a database is opened; an unknown endpoint exits 1.
 */
export async function endpointsReplay(io: CliIo, name: string, o: ReplayOptions): Promise<void> {
  const req = { since: o.since, until: o.until, status: o.status, dry_run: o.dryRun === true, idempotency_key: o.idempotencyKey };
  try {
    parseReplayRequest(req);
  } catch (err) {
    const field = err instanceof ApiError ? err.details?.['field'] : undefined;
    if (typeof field === 'string')
      throw new ExitError(EXIT.usage, `--${field.replaceAll('_', '-')}${err instanceof Error ? err.message.slice(field.length) : ''}`);
    throw err;
  }
  const config = readConfig(io, o, { needSecrets: false }); // nothing here delivers
  await withDatabase(io, config, async (db, log) => {
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
    printJson(io, await replayEndpoint(ctx, name, req, actor(io)));
  });
}
