/**
 * Writes to stored endpoints (docs/operations.md#endpoints-at-run-time): create, change, delete and
 * rotate, each in one transaction with its audit row and a NOTIFY that every process re-reads on.
 * Secrets and header values are sealed here before they reach the row (./codec.ts).
 */
import type pg from 'pg';
import { writeAudit } from '../admin/audit.js';
import { redactUrl, type Config } from '../config/index.js';
import { isStandardSecret } from '../config/rules.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ApiError, badField } from '../errors.js';
import { cancelEndpointJobs } from '../queue/transitions.js';
import { newSigningSecret } from '../crypto/signing-secret.js';
import { planRotation, type RotationInput } from '../admin/rotation.js';
import { checkServiceTopics, notFound, type Actor } from './access.js';
import { sealHeaders, secretContext, type SecretCodec } from './codec.js';
import type { CreateEndpointInput, UpdateEndpointInput } from './input.js';
import { COLUMNS, toEndpoint, type StoredRow } from './rows.js';

// What importers of this module used before it was split by concern.
export { withinGrants, type Actor } from './access.js';
export { codecOf, headerContext, secretContext, type SecretCodec } from './codec.js';
export { purgeTombstones, readStoredEndpoints, storedVersion, toEndpoint, type StoredRow } from './rows.js';

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

/** The fields of an endpoint an audit row may show: never a secret or a header value. */
function auditable(row: Partial<StoredRow>): Record<string, unknown> {
  const { secret: _s, secret_next: _n, headers_sealed: _h, ...rest } = row;
  // Header values and URL credentials (user-info, api_key=… in the query) are never written to the audit log.
  return {
    ...rest,
    ...(rest.url !== undefined ? { url: redactUrl(rest.url) } : {}),
    ...(rest.headers ? { headers: Object.keys(rest.headers) } : {}),
  };
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
      `insert into endpoints (name, url, topics, scheme, headers, headers_sealed, timeout_ms, max_in_flight, rate_limit, enabled, description, secret, owner, ordering, propagate_trace)
       values ($1, $2, $3, $4, $5::jsonb, true, $6, $7, $8, $9, $10, $11, $12, $14, $15)
       on conflict (name) do update set url = excluded.url, topics = excluded.topics, scheme = excluded.scheme, ordering = excluded.ordering,
         propagate_trace = excluded.propagate_trace,
         headers = excluded.headers, headers_sealed = true,
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
        JSON.stringify(sealHeaders(ctx.codec, input.name, input.headers ?? {})),
        input.timeout ?? null,
        input.max_in_flight ?? null,
        input.rate_limit ?? null,
        input.enabled ?? true,
        input.description ?? '',
        ctx.codec.seal(secret, secretContext(input.name, 'secret')),
        actor.name,
        ctx.tombstoneMs,
        input.ordering ?? 'relaxed',
        input.propagate_trace ?? null,
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
         headers = coalesce($5::jsonb, headers), headers_sealed = headers_sealed or $5::jsonb is not null, timeout_ms = case when $6::boolean then $7 else timeout_ms end,
         max_in_flight = case when $8::boolean then $9 else max_in_flight end,
         rate_limit = case when $10::boolean then $11 else rate_limit end,
         enabled = coalesce($12, enabled), description = coalesce($13, description), ordering = coalesce($14, ordering),
         propagate_trace = case when $15::boolean then $16 else propagate_trace end, updated_at = clock_timestamp()
       where name = $1 returning ${COLUMNS}`,
      [
        name,
        patch.url ?? null,
        patch.topics ?? null,
        patch.scheme ?? null,
        patch.headers === undefined ? null : JSON.stringify(sealHeaders(ctx.codec, name, patch.headers)),
        patch.timeout !== undefined,
        patch.timeout ?? null,
        patch.max_in_flight !== undefined,
        patch.max_in_flight ?? null,
        patch.rate_limit !== undefined,
        patch.rate_limit ?? null,
        patch.enabled ?? null,
        patch.description ?? null,
        patch.ordering ?? null,
        patch.propagate_trace !== undefined,
        patch.propagate_trace ?? null,
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
      // A tombstone keeps no credential: no secret, no header value.
      `update endpoints set deleted_at = now(), updated_at = clock_timestamp(), secret = '', secret_next = null,
         headers = '{}', headers_sealed = true where name = $1`,
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
