import type { Queryable } from '../db/pool.js';

/**
 * The queue's read-only probes: cheap index reads the worker loop needs. Every write to `jobs` is
 * in transitions.ts.
 */

/**
 * The endpoints that have pending jobs, by a loose index scan (one probe per endpoint): how a
 * worker finds jobs for endpoints missing from its config (a rolling deploy) without a table scan.
 */
export async function pendingEndpoints(db: Queryable): Promise<string[]> {
  const res = await db.query<{ endpoint: string }>({
    name: 'acw_pending_endpoints',
    text: `with recursive e as (
        (select endpoint from job_queue where status = 'pending' and endpoint is not null order by endpoint limit 1)
        union all
        select (select endpoint from job_queue where status = 'pending' and endpoint > e.endpoint order by endpoint limit 1)
        from e where e.endpoint is not null)
      select endpoint from e where endpoint is not null`,
  });
  return res.rows.map((r) => r.endpoint);
}

/** When the next pending job falls due (ms from now), read from the first entry of the due index. */
export async function nextDueIn(db: Queryable): Promise<number | null> {
  const res = await db.query<{ ms: number | null }>({
    name: 'acw_next_due',
    text: `select extract(epoch from (run_at - now())) * 1000 as ms from job_queue
      where status = 'pending' order by run_at, id limit 1`,
  });
  const ms = res.rows[0]?.ms;
  return ms === undefined || ms === null ? null : Math.max(0, Number(ms));
}
