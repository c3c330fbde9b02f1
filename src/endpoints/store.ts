import type pg from 'pg';
import { writeAudit } from '../admin/audit.js';
import { redactUrl, type Config, type Endpoint, type Role } from '../config/index.js';
import { DEFAULT_CONNECT_TIMEOUT_MS } from '../config/endpoints.js';
import { rateLimit } from '../config/fields.js';
import { isStandardSecret } from '../config/rules.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ApiError, badField } from '../errors.js';
import { cancelEndpointJobs } from '../queue/transitions.js';
import type { SecretBox } from '../crypto/secret-box.js';
import { newSigningSecret } from '../crypto/signing-secret.js';
import { planRotation, type RotationInput } from '../admin/rotation.js';
import type { CreateEndpointInput, UpdateEndpointInput } from './input.js';

/**
 * Seals and opens secrets at rest (src/crypto); the store never sees a key. The context (the
 * endpoint's name and which secret) is authenticated with the value, so a sealed secret copied to
 * another row, or swapped with the row's other secret, fails to open.
 */
export interface SecretCodec {
  seal(plain: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** What a stored secret is bound to. */
export function secretContext(name: string, which: 'secret' | 'secret_next'): string {
  return `endpoint:${name}:${which}`;
}

/** Who acts, and what they may touch: a service only its own endpoints, within its granted topics. */
export interface Actor {
  name: string;
  role: Role;
}

export interface StoredRow {
  name: string;
  url: string;
  topics: string[];
  scheme: 'acw' | 'standard';
  headers: Record<string, string>;
  timeout_ms: number | null;
  max_in_flight: number | null;
  rate_limit: string | null;
  enabled: boolean;
  description: string;
  secret: string;
  secret_next: string | null;
  rotate_until: Date | null;
  owner: string;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `name, url, topics, scheme, headers, timeout_ms, max_in_flight, rate_limit, enabled, description,
  secret, secret_next, rotate_until, owner, created_at, updated_at`;

/** Every live stored endpoint, by name. */
export async function readStoredEndpoints(db: Queryable): Promise<StoredRow[]> {
  const res = await db.query<StoredRow>(`select ${COLUMNS} from endpoints where deleted_at is null order by name`);
  return res.rows;
}

/** A cheap fingerprint of the table: it changes with every insert, update and delete (tombstone). */
export async function storedVersion(db: Queryable): Promise<string> {
  const res = await db.query<{ v: string }>(`select count(*)::text || ':' || coalesce(max(updated_at)::text, '') as v from endpoints`);
  return res.rows[0]?.v ?? '';
}

/** A stored row as the service uses it, with this process's notify.webhook defaults filled in. */
export function toEndpoint(row: StoredRow, config: Config, codec: SecretCodec): Endpoint {
  const w = config.notify.webhook;
  const timeout = row.timeout_ms ?? w.timeout;
  const rate = row.rate_limit === null ? w.rate_limit : rateLimit().parse(row.rate_limit);
  const next =
    row.secret_next !== null && row.rotate_until !== null ? codec.open(row.secret_next, secretContext(row.name, 'secret_next')) : undefined;
  return {
    name: row.name,
    url: row.url,
    secret: codec.open(row.secret, secretContext(row.name, 'secret')),
    ...(next !== undefined && row.rotate_until ? { secret_next: next, rotate_until: row.rotate_until.getTime() } : {}),
    topics: row.topics,
    timeout,
    connect_timeout: Math.min(w.connect_timeout ?? DEFAULT_CONNECT_TIMEOUT_MS, timeout),
    max_in_flight: Math.min(row.max_in_flight ?? w.max_in_flight, w.max_in_flight_total),
    rate_limit: rate,
    scheme: row.scheme,
    headers: row.headers,
    enabled: w.enabled && row.enabled,
    source: 'api',
    description: row.description,
    owner: row.owner,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    ssrf_guard: true,
    allow_networks: w.allow_networks,
  };
}

/** The secret box (src/crypto) as the store uses it. */
export function codecOf(box: SecretBox | null): SecretCodec | null {
  return box ? { seal: (p, ctx) => box.encrypt(p, ctx), open: (s, ctx) => box.decrypt(s, ctx) } : null;
}

export interface StoreContext {
  pool: pg.Pool;
  codec: SecretCodec;
  /** Names of the endpoints in the config file: never created, edited or deleted here. */
  configNames: ReadonlySet<string>;
  /** NOTIFY channel every process re-reads the table on. */
  channel: string;
  /** Topic patterns a service principal may subscribe its endpoints to (notify.webhook.service_endpoints.topics). */
  serviceTopics: readonly string[];
  /** Jobs' dead retention: how long a deleted endpoint's name stays reserved. */
  tombstoneMs: number;
  /** A check of the URL for the SSRF guard (throws the 400 naming `url`), if any. */
  checkUrl?: (url: string) => Promise<void>;
}

/** The fields of an endpoint an audit row may show: never the secret. */
function auditable(row: Partial<StoredRow>): Record<string, unknown> {
  const { secret: _s, secret_next: _n, ...rest } = row;
  // Header values and URL credentials (user-info, api_key=… in the query) are never written to the audit log.
  return {
    ...rest,
    ...(rest.url !== undefined ? { url: redactUrl(rest.url) } : {}),
    ...(rest.headers ? { headers: Object.keys(rest.headers) } : {}),
  };
}

/** A service may subscribe only to topics within its grants: an exact topic, or a pattern no wider than a granted one. */
export function withinGrants(topic: string, grants: readonly string[]): boolean {
  for (const g of grants) {
    if (g === '*') return true;
    if (g === topic) return true;
    if (g.endsWith('.*')) {
      const prefix = g.slice(0, -1); // keeps the dot
      const t = topic.endsWith('.*') ? topic.slice(0, -1) : topic;
      if (t.startsWith(prefix) && t.length > prefix.length) return true;
    }
  }
  return false;
}

function checkServiceTopics(actor: Actor, topics: readonly string[], grants: readonly string[]): void {
  if (actor.role !== 'service') return;
  if (grants.length === 0) {
    throw new ApiError(403, 'forbidden', 'role service may not manage endpoints: notify.webhook.service_endpoints.topics grants none');
  }
  topics.forEach((t, i) => {
    if (!withinGrants(t, grants)) {
      throw new ApiError(403, 'forbidden', `topics[${i}]: "${t}" is outside the topics granted to services (${grants.join(', ')})`, {
        field: `topics[${i}]`,
      });
    }
  });
}

function notFound(name: string): ApiError {
  return new ApiError(404, 'not_found', `name: no endpoint named ${JSON.stringify(name.slice(0, 100))}`, { field: 'name' });
}

/** The stored endpoint `name` locked for a change, as `actor` may see it (a service: its own only). */
async function lockOwn(client: Queryable, ctx: StoreContext, name: string, actor: Actor): Promise<StoredRow> {
  if (ctx.configNames.has(name)) {
    throw new ApiError(
      409,
      'config_endpoint',
      `name: endpoint ${name} is defined in the config file: edit the file (pause and resume work here)`,
      {
        field: 'name',
      },
    );
  }
  const res = await client.query<StoredRow>(`select ${COLUMNS} from endpoints where name = $1 and deleted_at is null for update`, [name]);
  const row = res.rows[0];
  if (!row || (actor.role === 'service' && row.owner !== actor.name)) throw notFound(name);
  return row;
}

async function announce(client: Queryable, channel: string, name: string): Promise<void> {
  await client.query(`select pg_notify($1, $2)`, [channel, name]);
}

/** Create: one row, one audit row, a NOTIFY; the secret (given or generated) is returned once. */
export async function createStoredEndpoint(
  ctx: StoreContext,
  input: CreateEndpointInput,
  actor: Actor,
): Promise<{ row: StoredRow; secret: string }> {
  const scheme = input.scheme ?? 'acw';
  checkServiceTopics(actor, input.topics, ctx.serviceTopics);
  if (ctx.configNames.has(input.name)) {
    throw new ApiError(409, 'conflict', `name: an endpoint named ${input.name} is defined in the config file`, { field: 'name' });
  }
  if (input.secret !== undefined && scheme === 'standard' && !isStandardSecret(input.secret)) {
    throw badField('secret', 'scheme "standard" needs a secret like "whsec_<base64>"');
  }
  await ctx.checkUrl?.(input.url);
  const secret = input.secret ?? newSigningSecret(scheme);
  const row = await withTransaction(ctx.pool, async (client) => {
    const res = await client.query<StoredRow>(
      `insert into endpoints (name, url, topics, scheme, headers, timeout_ms, max_in_flight, rate_limit, enabled, description, secret, owner)
       values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11, $12)
       on conflict (name) do update set url = excluded.url, topics = excluded.topics, scheme = excluded.scheme, headers = excluded.headers,
         timeout_ms = excluded.timeout_ms, max_in_flight = excluded.max_in_flight, rate_limit = excluded.rate_limit,
         enabled = excluded.enabled, description = excluded.description, secret = excluded.secret, secret_next = null,
         rotate_until = null, owner = excluded.owner, created_at = now(), updated_at = clock_timestamp(), deleted_at = null
         where endpoints.deleted_at is not null and endpoints.deleted_at < now() - $13 * interval '1 millisecond'
       returning ${COLUMNS}`,
      [
        input.name,
        input.url,
        input.topics,
        scheme,
        JSON.stringify(input.headers ?? {}),
        input.timeout ?? null,
        input.max_in_flight ?? null,
        input.rate_limit ?? null,
        input.enabled ?? true,
        input.description ?? '',
        ctx.codec.seal(secret, secretContext(input.name, 'secret')),
        actor.name,
        ctx.tombstoneMs,
      ],
    );
    const created = res.rows[0];
    if (!created) {
      const old = await client.query<{ deleted_at: Date | null; freed: Date | null }>(
        `select deleted_at, deleted_at + $2 * interval '1 millisecond' as freed from endpoints where name = $1`,
        [input.name, ctx.tombstoneMs],
      );
      const d = old.rows[0];
      if (d?.deleted_at) {
        throw new ApiError(
          409,
          'conflict',
          `name: ${input.name} belonged to an endpoint deleted at ${d.deleted_at.toISOString()}; the name is kept for its old jobs until ${d.freed?.toISOString()}`,
          { field: 'name' },
        );
      }
      throw new ApiError(409, 'conflict', `name: an endpoint named ${input.name} exists already`, { field: 'name' });
    }
    // A name used before starts with a fresh state row.
    await client.query(`delete from endpoint_state where endpoint = $1`, [input.name]);
    await client.query(`insert into endpoint_state (endpoint) values ($1) on conflict do nothing`, [input.name]);
    await writeAudit(client, {
      action: 'endpoint.created',
      actor: actor.name,
      targetType: 'endpoint',
      targetId: input.name,
      details: auditable(created),
    });
    await announce(client, ctx.channel, input.name);
    return created;
  });
  return { row, secret };
}

/** Update: the fields given; one audit row with what changed (old and new, secrets never); a NOTIFY. */
export async function updateStoredEndpoint(ctx: StoreContext, name: string, patch: UpdateEndpointInput, actor: Actor): Promise<StoredRow> {
  if (patch.topics) checkServiceTopics(actor, patch.topics, ctx.serviceTopics);
  else if (actor.role === 'service') checkServiceTopics(actor, [], ctx.serviceTopics);
  if (patch.url !== undefined) await ctx.checkUrl?.(patch.url);
  return withTransaction(ctx.pool, async (client) => {
    const old = await lockOwn(client, ctx, name, actor);
    if (
      patch.scheme === 'standard' &&
      old.scheme !== 'standard' &&
      !isStandardSecret(ctx.codec.open(old.secret, secretContext(name, 'secret')))
    ) {
      throw badField('scheme', 'the endpoint\'s secret is not a "whsec_<base64>" secret: create a new endpoint for scheme "standard"');
    }
    const res = await client.query<StoredRow>(
      `update endpoints set url = coalesce($2, url), topics = coalesce($3, topics), scheme = coalesce($4, scheme),
         headers = coalesce($5::jsonb, headers), timeout_ms = case when $6::boolean then $7 else timeout_ms end,
         max_in_flight = case when $8::boolean then $9 else max_in_flight end,
         rate_limit = case when $10::boolean then $11 else rate_limit end,
         enabled = coalesce($12, enabled), description = coalesce($13, description), updated_at = clock_timestamp()
       where name = $1 returning ${COLUMNS}`,
      [
        name,
        patch.url ?? null,
        patch.topics ?? null,
        patch.scheme ?? null,
        patch.headers === undefined ? null : JSON.stringify(patch.headers),
        patch.timeout !== undefined,
        patch.timeout ?? null,
        patch.max_in_flight !== undefined,
        patch.max_in_flight ?? null,
        patch.rate_limit !== undefined,
        patch.rate_limit ?? null,
        patch.enabled ?? null,
        patch.description ?? null,
      ],
    );
    const row = res.rows[0]!;
    const changed: Record<string, { from: unknown; to: unknown }> = {};
    const before = auditable(old);
    const after = auditable(row);
    for (const k of Object.keys(patch)) {
      const key = k === 'timeout' ? 'timeout_ms' : k;
      if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed[key] = { from: before[key], to: after[key] };
    }
    await writeAudit(client, {
      action: 'endpoint.updated',
      actor: actor.name,
      targetType: 'endpoint',
      targetId: name,
      details: { changed },
    });
    await announce(client, ctx.channel, name);
    return row;
  });
}

/**
 * Delete: refused with 409 while the endpoint has pending jobs, unless `force`, which cancels them.
 * The row stays as a tombstone (its name reserved for the jobs' dead retention); its state row goes.
 */
export async function deleteStoredEndpoint(
  ctx: StoreContext,
  name: string,
  force: boolean,
  actor: Actor,
): Promise<{ cancelled_jobs: number }> {
  if (actor.role === 'service') checkServiceTopics(actor, [], ctx.serviceTopics);
  return withTransaction(ctx.pool, async (client) => {
    await lockOwn(client, ctx, name, actor);
    let cancelled = 0;
    if (force) {
      cancelled = await cancelEndpointJobs(client, name);
    } else {
      const pending = await client.query<{ n: number }>(`select count(*)::int as n from jobs where status = 'pending' and endpoint = $1`, [
        name,
      ]);
      const n = pending.rows[0]?.n ?? 0;
      if (n > 0) {
        throw new ApiError(
          409,
          'endpoint_has_jobs',
          `name: endpoint ${name} has ${n} pending jobs: delete with ?force=true to cancel them`,
          {
            field: 'name',
            pending_jobs: n,
          },
        );
      }
    }
    await client.query(
      `update endpoints set deleted_at = now(), updated_at = clock_timestamp(), secret = '', secret_next = null where name = $1`,
      [name],
    );
    await client.query(`delete from endpoint_state where endpoint = $1`, [name]);
    await writeAudit(client, {
      action: 'endpoint.deleted',
      actor: actor.name,
      targetType: 'endpoint',
      targetId: name,
      details: { cancelled_jobs: cancelled, force },
    });
    await announce(client, ctx.channel, name);
    return { cancelled_jobs: cancelled };
  });
}

/**
 * Rotate a stored endpoint's secret (docs/operations.md#rotating-a-secret): the secret in force
 * stays `secret`, the new one becomes `secret_next` until the overlap ends, both sealed; one audit
 * row without either secret; a NOTIFY. Returns the new secret (given or generated) once.
 */
export async function rotateStoredSecret(
  ctx: StoreContext,
  name: string,
  input: RotationInput,
  actor: Actor,
  config: Config,
): Promise<{ secret_next: string; rotate_until: string; generated: boolean }> {
  if (actor.role === 'service') checkServiceTopics(actor, [], ctx.serviceTopics);
  return withTransaction(ctx.pool, async (client) => {
    const row = await lockOwn(client, ctx, name, actor);
    const plan = planRotation(toEndpoint(row, config, ctx.codec), input);
    await client.query(
      `update endpoints set secret = $2, secret_next = $3, rotate_until = to_timestamp($4::float8 / 1000), updated_at = clock_timestamp() where name = $1`,
      [
        name,
        ctx.codec.seal(plan.secret, secretContext(name, 'secret')),
        ctx.codec.seal(plan.secret_next, secretContext(name, 'secret_next')),
        plan.rotate_until,
      ],
    );
    const until = new Date(plan.rotate_until).toISOString();
    await writeAudit(client, {
      action: 'endpoint.secret_rotated',
      actor: actor.name,
      targetType: 'endpoint',
      targetId: name,
      details: { rotate_until: until, generated: plan.generated },
    });
    await announce(client, ctx.channel, name);
    return { secret_next: plan.secret_next, rotate_until: until, generated: plan.generated };
  });
}

/** Tombstones older than the retention: their names are free again (run by the purge). */
export async function purgeTombstones(db: Queryable, retentionMs: number): Promise<number> {
  const res = await db.query(`delete from endpoints where deleted_at is not null and deleted_at < now() - $1 * interval '1 millisecond'`, [
    retentionMs,
  ]);
  return res.rowCount ?? 0;
}
