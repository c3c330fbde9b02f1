import type pg from 'pg';
import type { ClaimedJob } from '../../src/queue/types.js';

/**
 * `n` jobs inserted as `running` under `test-worker`, each with its own lease token, as a claim
 * would leave them: what the accounting classes (Flusher, Heartbeat) are handed by the pool.
 */
export async function insertRunningJobs(
  pool: pg.Pool,
  n: number,
  opts: { maxAttempts?: number; leaseMs?: number } = {},
): Promise<ClaimedJob[]> {
  const maxAttempts = opts.maxAttempts ?? 3;
  const res = await pool.query<{ id: string; lease_token: string; exp_ms: number; now_ms: number; created_at: Date }>(
    `insert into jobs (type, payload, max_attempts, status, attempts, locked_by, lease_token, lease_expires_at)
     select 't', jsonb_build_object('n', g), $2, 'running', 1, 'test-worker', gen_random_uuid(), now() + $3 * interval '1 millisecond'
     from generate_series(1, $1) g
     returning id, lease_token, extract(epoch from lease_expires_at)::float8 * 1000 as exp_ms,
       extract(epoch from now())::float8 * 1000 as now_ms, created_at`,
    [n, maxAttempts, opts.leaseMs ?? 30_000],
  );
  const localNow = Date.now();
  return res.rows.map((r) => ({
    id: r.id,
    type: 't',
    payload: {},
    attempts: 1,
    maxAttempts,
    leaseToken: r.lease_token,
    leaseExpiresAt: r.exp_ms - (r.now_ms - localNow),
    eventId: null,
    endpoint: null,
    createdAt: r.created_at,
    endpointUnknownSince: null,
    skippedTurnsSince: null,
  }));
}
