import type pg from 'pg';
import type { Endpoint } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { writeAudit } from './audit.js';

/**
 * The operator's side of `endpoint_state` (docs/operations.md#pausing-an-endpoint): pause and
 * resume by hand, probe now, and the read behind `GET /v1/endpoints` and the endpoint metrics.
 * Every change is one transaction with its audit row and a NOTIFY on the endpoints channel, so
 * every process re-reads the row at once instead of waiting out its cache.
 */

export type CircuitState = 'closed' | 'open' | 'half_open';

/** One endpoint's shared state as operators see it; an endpoint with no row is closed with no failures. */
export interface EndpointStateView {
  paused: boolean;
  paused_at: Date | null;
  paused_by: string | null;
  circuit: CircuitState;
  circuit_since: Date | null;
  opened_at: Date | null;
  next_probe_at: Date | null;
  consecutive_failures: number;
  last_error: string | null;
  last_error_at: Date | null;
  /** Due pending jobs held back (open, half-open, paused or disabled), counted up to the cap; 0 otherwise. */
  held_jobs: number;
}

/** Held jobs are counted up to this many per endpoint: a bounded read of the due index, like acw_queue_depth. */
export const HELD_JOBS_CAP = 100_000;

interface StateRow {
  endpoint: string;
  circuit: CircuitState | null;
  circuit_since: Date | null;
  opened_at: Date | null;
  next_probe_at: Date | null;
  consecutive_failures: number | null;
  last_error: string | null;
  last_error_at: Date | null;
  paused: boolean | null;
  paused_at: Date | null;
  paused_by: string | null;
  held_jobs: number;
}

/**
 * The state of each endpoint in one statement. Held jobs are counted only for an endpoint that holds
 * them, through jobs_due_endpoint_idx (endpoint, run_at, id) where status = 'pending', and at most
 * `cap` each, so a large backlog costs a bounded index read.
 */
export async function readEndpointStates(
  db: Queryable,
  endpoints: readonly Pick<Endpoint, 'name' | 'enabled'>[],
  cap = HELD_JOBS_CAP,
): Promise<Map<string, EndpointStateView>> {
  const res = await db.query<StateRow>({
    name: 'acw_endpoint_states',
    text: `select e.name as endpoint, s.circuit, s.circuit_since, s.opened_at, s.next_probe_at, s.consecutive_failures,
         s.last_error, s.last_error_at, s.paused, s.paused_at, s.paused_by,
         case when coalesce(s.circuit, 'closed') <> 'closed' or coalesce(s.paused, false) or not e.enabled
           then (select count(*)::int from (select 1 from jobs j
                  where j.status = 'pending' and j.endpoint = e.name and j.run_at <= now() limit $3) h)
           else 0 end as held_jobs
       from unnest($1::text[], $2::bool[]) as e(name, enabled)
       left join endpoint_state s on s.endpoint = e.name`,
    values: [endpoints.map((e) => e.name), endpoints.map((e) => e.enabled), cap],
  });
  return new Map(
    res.rows.map((r) => [
      r.endpoint,
      {
        paused: r.paused ?? false,
        paused_at: r.paused_at,
        paused_by: r.paused_by,
        circuit: r.circuit ?? 'closed',
        circuit_since: r.circuit_since,
        opened_at: r.opened_at,
        next_probe_at: r.next_probe_at,
        consecutive_failures: r.consecutive_failures ?? 0,
        last_error: r.last_error,
        last_error_at: r.last_error_at,
        held_jobs: r.held_jobs,
      },
    ]),
  );
}

/** The configured endpoint of that name, or the 404 naming `name` (before anything is written). */
export function requireEndpoint(endpoints: readonly Endpoint[], name: string): Endpoint {
  const ep = endpoints.find((e) => e.name === name);
  if (!ep) throw new ApiError(404, 'not_found', `name: no endpoint named ${JSON.stringify(name.slice(0, 100))}`, { field: 'name' });
  return ep;
}

/** What pause and resume need: the database, the configured endpoints, the endpoints NOTIFY channel, a log. */
export interface EndpointStateContext {
  pool: pg.Pool;
  endpoints: readonly Endpoint[];
  /** channels(schema).endpoints */
  channel: string;
  log: Logger;
}

async function announce(client: Queryable, channel: string, endpoint: string): Promise<void> {
  await client.query(`select pg_notify($1, $2)`, [channel, endpoint]);
}

/**
 * Pause by hand: no process claims the endpoint's jobs until it is resumed; they stay pending.
 * Pausing a paused endpoint writes nothing and answers `changed: false` (like revoking a revoked user).
 */
export async function pauseEndpoint(ctx: EndpointStateContext, name: string, actor: string): Promise<{ changed: boolean }> {
  const ep = requireEndpoint(ctx.endpoints, name);
  const changed = await withTransaction(ctx.pool, async (client) => {
    const res = await client.query<{ circuit: CircuitState }>(
      `insert into endpoint_state (endpoint, paused, paused_at, paused_by, updated_at) values ($1, true, now(), $2, now())
       on conflict (endpoint) do update set paused = true, paused_at = now(), paused_by = $2, updated_at = now()
         where not endpoint_state.paused
       returning circuit`,
      [ep.name, actor],
    );
    const row = res.rows[0];
    if (!row) return false;
    await writeAudit(client, {
      action: 'endpoint.paused',
      actor,
      targetType: 'endpoint',
      targetId: ep.name,
      details: { circuit: row.circuit },
    });
    await announce(client, ctx.channel, ep.name);
    return true;
  });
  if (changed) ctx.log.info({ event: 'endpoint.paused', endpoint: ep.name, actor }, `endpoint ${ep.name} paused by ${actor}`);
  return { changed };
}

/**
 * Resume: deliveries flow again. An open circuit is probed at once (next_probe_at = now()) rather
 * than after the rest of its cool-down, paused or not, since resuming says the receiver is back.
 * Nothing to do (not paused, circuit not waiting for a probe) writes nothing: `changed: false`.
 */
export async function resumeEndpoint(ctx: EndpointStateContext, name: string, actor: string): Promise<{ changed: boolean }> {
  const ep = requireEndpoint(ctx.endpoints, name);
  const done = await withTransaction(ctx.pool, async (client) => {
    const res = await client.query<{ was_paused: boolean; circuit: CircuitState; probe_now: boolean }>(
      `with old as (select paused, circuit, next_probe_at from endpoint_state where endpoint = $1 for update)
       update endpoint_state s
         set paused = false, paused_at = null, paused_by = null,
             next_probe_at = case when s.circuit = 'open' then least(s.next_probe_at, now()) else s.next_probe_at end,
             updated_at = now()
       from old
       where s.endpoint = $1 and (old.paused or (old.circuit = 'open' and (old.next_probe_at is null or old.next_probe_at > now())))
       returning old.paused as was_paused, s.circuit, (s.circuit = 'open') as probe_now`,
      [ep.name],
    );
    const row = res.rows[0];
    if (!row) return null;
    const details = { was_paused: row.was_paused, circuit: row.circuit, probe_now: row.probe_now };
    await writeAudit(client, { action: 'endpoint.resumed', actor, targetType: 'endpoint', targetId: ep.name, details });
    await announce(client, ctx.channel, ep.name);
    return details;
  });
  if (done) ctx.log.info({ event: 'endpoint.resumed', endpoint: ep.name, actor, ...done }, `endpoint ${ep.name} resumed by ${actor}`);
  return { changed: done !== null };
}

/**
 * Inside a test delivery's transaction: refuse a paused endpoint (409 endpoint_paused, so the
 * transaction writes nothing) and make an open circuit probe at once. Returns whether it did.
 */
export async function prepareTestDelivery(client: Queryable, channel: string, name: string): Promise<{ probeNow: boolean }> {
  const cur = await client.query<{ paused: boolean; circuit: CircuitState }>(
    `select paused, circuit from endpoint_state where endpoint = $1 for update`,
    [name],
  );
  const row = cur.rows[0];
  if (!row) return { probeNow: false };
  if (row.paused) {
    const why = `endpoint ${name} is paused: a test would wait until it is resumed (POST /v1/endpoints/${name}/resume)`;
    throw new ApiError(409, 'endpoint_paused', why, { field: 'name' });
  }
  if (row.circuit !== 'open') return { probeNow: false };
  await client.query(`update endpoint_state set next_probe_at = least(next_probe_at, now()), updated_at = now() where endpoint = $1`, [
    name,
  ]);
  await announce(client, channel, name);
  return { probeNow: true };
}
