import type pg from 'pg';
import { withTransaction, type Queryable } from '../../db/pool.js';
import { ATTEMPTS_SPENT, CLEAR_LEASE, toDead, type ReapedRow } from '../job-rows.js';
import { FINISH, KEEP_ATTEMPTS } from './history-moves.js';
import type { DeadHook } from '../types.js';
import { advanceKeys, lockKeys, type FinishedKeyed } from './ordering.js';

/** The keyed rows of a statement's dead (or cancelled) jobs, as advanceKeys takes them. */
export function keyedFinished(
  rows: ReadonlyArray<{ id: string; endpoint: string | null; ordering_key?: string | null; status?: string; dead?: boolean }>,
): FinishedKeyed[] {
  const out: FinishedKeyed[] = [];
  for (const r of rows)
    if (r.ordering_key != null && r.endpoint !== null)
      out.push({ endpoint: r.endpoint, key: r.ordering_key, id: r.id, dead: r.dead ?? r.status === 'dead' });
  return out;
}
import type { ExpiredRow, ExpiryCursor } from '../transition-types.js';

// The process's own moves on jobs no worker has leased: the unpark at start, the reaper's expired
// leases, the expiry of held jobs past their maximum age (the module's rules: ../transitions.ts).

/**
 * Unpark: make jobs skipped for these endpoints (they were unknown or disabled when their turn came) due
 * now: run at start by a process that has them enabled. `skipped_since` stays (a process that
 * still has the endpoint disabled keeps its long waits); a real attempt clears it. Reads only the
 * future part of each endpoint's range in the due index. Returns how many were woken.
 */
export async function unparkJobs(db: Queryable, endpoints: readonly string[]): Promise<number> {
  const res = await db.query(
    `update job_queue set run_at = now()
      where status = 'pending' and endpoint = any($1::text[]) and run_at > now() and skipped_since is not null`,
    [endpoints],
  );
  return res.rowCount ?? 0;
}

/**
 * Reap: running jobs whose lease expired (their worker crashed or hung) -> pending, or -> dead
 * when no attempt is left, with the dead hook and a NOTIFY in the same transaction. Reads only the
 * partial index on running jobs; at most `batch` jobs per call. The ordering keys of the jobs it
 * takes are locked first, before any job row, in the order every writer of a key's head takes them: a late completion of the same key (which locks its key, then the job's row) waits
 * for the reaper, or the reaper for it, and the two never deadlock.
 */
export async function reapJobs(
  pool: pg.Pool,
  opts: { batch: number; channel: string; onDead?: DeadHook | undefined },
): Promise<ReapedRow[]> {
  return withTransaction(pool, async (client) => {
    // The reaper's range is job_queue_running_idx (keyed so that renewals stay HOT): it reads every
    // running job, which are few, and takes those whose lease ran out.
    const lost = `'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped renewing it'`;
    // The candidates, unlocked; their keys' rows are locked, then the candidates are taken again
    // (the statement below checks each still is running and expired, and skips the locked ones).
    const seen = await client.query<{ id: string; endpoint: string | null; ordering_key: string | null }>(
      `select j.id, j.endpoint, j.ordering_key from job_queue j where j.status = 'running' and j.lease_expires_at < now()
       order by j.lease_expires_at limit $1`,
      [opts.batch],
    );
    if (seen.rows.length === 0) return [];
    await lockKeys(
      client,
      seen.rows.flatMap((r) => (r.endpoint !== null && r.ordering_key !== null ? [{ endpoint: r.endpoint, key: r.ordering_key }] : [])),
    );
    const res = await client.query<ReapedRow>(
      `with expired as (
           select id, locked_by from job_queue where id = any($1::uuid[]) and status = 'running' and lease_expires_at < now()
           order by lease_expires_at for update skip locked),
         upd as (
           update job_queue j set status = 'pending', run_at = now(), last_error = ${lost}, ${CLEAR_LEASE}
           from expired e where j.id = e.id and not ${ATTEMPTS_SPENT}
           returning j.id, j.status, j.type, j.payload, j.attempts, j.max_attempts, j.last_error, j.event_id, j.endpoint, e.locked_by,
             j.ordering_key),
         moved as (
           delete from job_queue j using expired e where j.id = e.id and ${ATTEMPTS_SPENT}
           returning j.*, ${lost} as error),
         ${FINISH('moved', 'dead', 'm.error')},
         kept as (${KEEP_ATTEMPTS('moved')}),
         done as (
           select * from upd
           union all
           select id, 'dead', type, payload, attempts, max_attempts, error, event_id, endpoint, locked_by, ordering_key from moved)
         select done.*, (select pg_notify($2, '') where exists (select 1 from upd)) as n from done`,
      [seen.rows.map((r) => r.id), opts.channel],
    );
    const dead = res.rows.filter((r) => r.status === 'dead');
    // A dead head moves its key on (or blocks it); its next job goes in pending, for any worker.
    await advanceKeys(client, keyedFinished(dead), opts.channel, undefined, true);
    if (dead.length > 0 && opts.onDead)
      await opts.onDead(
        client,
        dead.map((r) => toDead(r, 'reaped')),
      );
    return res.rows;
  });
}

/**
 * Expire (docs/operations.md#maximum-age): of the next `batch` due pending jobs after `after`, the
 * webhook jobs whose series started over `maxAgeMs` ago -> dead, "endpoint unavailable"; returns
 * them and the next page's cursor (null: done). Only due jobs: held ones stay due, while a job not
 * yet due is in its own back-off and gets its turn first (reading the future part would walk every
 * pending job). The page is a plain range of the due index: filtering on the age in that scan let
 * the planner pick a scan of the table behind a big young backlog. SKIP LOCKED leaves a job being
 * claimed or expired elsewhere to that transaction; the rows returned are the ones changed here.
 */
export async function expireHeldJobs(
  client: Queryable,
  opts: { maxAgeMs: number; batch: number; after?: ExpiryCursor | undefined; channel?: string | null },
): Promise<{ rows: ExpiredRow[]; next: ExpiryCursor | null }> {
  const res = await client.query<{ examined: number; last_run_at: string; last_id: string } & Partial<ExpiredRow>>(
    `with page as (
         select id, run_at from job_queue
         where status = 'pending' and run_at <= now() and (run_at, id) > ($1::timestamptz, $2::uuid)
         order by run_at, id limit $4),
       last as (
         select run_at::text as last_run_at, id as last_id, (select count(*)::int from page) as examined
         from page order by run_at desc, id desc limit 1),
       old as (
         select id from job_queue
         where id = any(array(select id from page)) and status = 'pending' and endpoint is not null
           and series_started_at < now() - $3 * interval '1 millisecond'
         for update skip locked),
       moved as (delete from job_queue j using old where j.id = old.id returning j.*),
       ${FINISH('moved', 'dead', `'endpoint unavailable'`)},
       kept as (${KEEP_ATTEMPTS('moved')}),
       upd as (select id, type, payload, attempts, endpoint, event_id, series_started_at, ordering_key from moved)
     select last.*, upd.* from last left join upd on true`,
    [opts.after?.runAt ?? '-infinity', opts.after?.id ?? '00000000-0000-0000-0000-000000000000', opts.maxAgeMs, opts.batch],
  );
  const first = res.rows[0];
  const rows = res.rows.filter((r): r is typeof r & ExpiredRow => r.id !== null && r.id !== undefined);
  const next = first && first.examined >= opts.batch ? { runAt: first.last_run_at, id: first.last_id } : null;
  await advanceKeys(client, keyedFinished(rows.map((r) => ({ ...r, dead: true }))), opts.channel ?? null);
  return { rows, next };
}
