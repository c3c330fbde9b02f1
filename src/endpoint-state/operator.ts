import type pg from 'pg';
import { writeAudit } from '../admin/audit.js';
import { requireEndpoint } from '../admin/params.js';
import type { Endpoint } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { CircuitState } from './types.js';

/**
 * The operator's changes to `endpoint_state` (docs/operations.md#pausing-an-endpoint): pause and
 * resume by hand, and probe now for a test delivery (the reads are in health.ts). Every change is
 * one transaction with its audit row and a NOTIFY on the endpoints channel, so every process
 * re-reads the row at once instead of waiting out its cache.
 */

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
