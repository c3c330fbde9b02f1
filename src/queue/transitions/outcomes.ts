import type pg from 'pg';
import { withTransaction, type Queryable } from '../../db/pool.js';
import { attemptArrays } from '../attempt-rows.js';
import { ATTEMPTS_SPENT, CLEAR_LEASE, HELD, NOT_SKIPPED, dbToLocal, toDead, type TransitionRow } from '../job-rows.js';
import { FINISH, KEEP_ATTEMPTS } from './history-moves.js';
import type { AttemptRecord, DeadHook, DeadJob, LeaseRef } from '../types.js';
import type { FailItem, FailResult, ReleaseItem } from '../transition-types.js';

// A worker's writes on the jobs it holds: each guarded by id + lease_token + status 'running', with
// the attempt rows in the same statement; a job that finishes leaves job_queue for job_history in
// that statement too (the module's rules: ../transitions.ts).

/** Renew the leases of every job held; returns the new expiry (on this process's clock) of those still held. */
export async function renewLeases(db: Queryable, leased: readonly LeaseRef[], leaseMs: number): Promise<Map<string, number>> {
  if (leased.length === 0) return new Map();
  // Changes no indexed column, so on a page with room (job_queue's fillfactor) it is a HOT update.
  const res = await db.query<{ id: string; lease_expires_at: Date; db_now: Date }>({
    name: 'acw_renew',
    text: `update job_queue j set lease_expires_at = now() + $3 * interval '1 millisecond'
      from unnest($1::uuid[], $2::uuid[]) t(id, lease_token)
      where ${HELD}
      returning j.id, j.lease_expires_at, now() as db_now`,
    values: [leased.map((h) => h.id), leased.map((h) => h.leaseToken), leaseMs],
  });
  const localNow = Date.now();
  return new Map(res.rows.map((r) => [r.id, dbToLocal(r.lease_expires_at.getTime(), r.db_now.getTime(), localNow)]));
}

/** Complete: running -> completed (into job_history). Returns the ids whose lease still held (the rest changed nothing). */
export async function completeJobs(
  db: Queryable,
  items: ReadonlyArray<{ leased: LeaseRef; attempt?: AttemptRecord | undefined }>,
): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const att = attemptArrays(items);
  const res = await db.query<{ id: string }>({
    name: att ? 'acw_complete_att' : 'acw_complete',
    text: `with moved as (
        delete from job_queue j using unnest($1::uuid[], $2::uuid[]) t(id, lease_token)
        where ${HELD}
        returning j.*),
      ${FINISH('moved', 'completed', 'null')}${att ? att.cte(3, '(select id, false as dead from moved)') : ''}
      select id from moved`,
    values: [items.map((i) => i.leased.id), items.map((i) => i.leased.leaseToken), ...(att?.values ?? [])],
  });
  return new Set(res.rows.map((r) => r.id));
}

/**
 * Fail: running -> pending after the delay (retry after back-off), or -> dead (into job_history)
 * when the attempts are spent or the failure is permanent. The dead hook runs in the same
 * transaction, with only the rows this one changed.
 */
export async function failJobs(pool: pg.Pool, items: readonly FailItem[], onDead?: DeadHook): Promise<FailResult> {
  if (items.length === 0) return { changed: new Map() };
  return withTransaction(pool, async (client) => {
    const { result, dead } = await failJobsIn(client, items);
    if (dead.length > 0 && onDead) await onDead(client, dead);
    return result;
  });
}

/** failJobs' statement, in the caller's transaction (which runs the dead hook with `dead`). */
export async function failJobsIn(client: Queryable, items: readonly FailItem[]): Promise<{ result: FailResult; dead: DeadJob[] }> {
  if (items.length === 0) return { result: { changed: new Map() }, dead: [] };
  const att = attemptArrays(items);
  // Two guarded writes on disjoint rows: those with attempts left stay in job_queue, the others move.
  const guard = HELD;
  const dead = `(t.dead or ${ATTEMPTS_SPENT})`;
  const text = `with t as (
      select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::boolean[], $5::int[]) t(id, lease_token, error, dead, delay)),
    upd as (
      update job_queue j set status = 'pending', run_at = now() + t.delay * interval '1 millisecond',
        last_error = t.error, ${NOT_SKIPPED}, ${CLEAR_LEASE}
      from t where ${guard} and not ${dead}
      returning j.id, j.status, j.type, j.payload, j.attempts, j.max_attempts, j.last_error, j.event_id, j.endpoint, j.run_at, j.ordering_key),
    moved as (
      delete from job_queue j using t where ${guard} and ${dead}
      returning j.*, t.error as error),
    ${FINISH('moved', 'dead', 'm.error')},
    kept as (${KEEP_ATTEMPTS('moved')})${att ? att.cte(6, '(select id, false as dead from upd union all select id, true from moved)') : ''}
    select * from upd
    union all
    select id, 'dead', type, payload, attempts, max_attempts, error, event_id, endpoint, run_at, ordering_key from moved`;
  const values = [
    items.map((i) => i.leased.id),
    items.map((i) => i.leased.leaseToken),
    items.map((i) => i.error),
    items.map((i) => i.dead),
    items.map((i) => Math.max(0, Math.round(i.delayMs))),
    ...(att?.values ?? []),
  ];
  // A job sent to dead on purpose keeps its reason; one that ran out of attempts says so.
  const reasons = new Map(items.map((i) => [i.leased.id, i.dead ? i.reason : ('max_attempts' as const)]));
  const res = await client.query<TransitionRow & { run_at: Date }>({ name: att ? 'acw_fail_att' : 'acw_fail', text, values });
  return {
    result: { changed: new Map(res.rows.map((r) => [r.id, { status: r.status as 'pending' | 'dead', runAt: r.run_at }])) },
    dead: res.rows.filter((r) => r.status === 'dead').map((r) => toDead(r, reasons.get(r.id) ?? 'max_attempts')),
  };
}

/**
 * Release: running -> pending without spending the attempt it was claimed with: a hand-back at
 * shutdown, or a skip of an unknown or disabled endpoint (`park`).
 */
export async function releaseJobs(db: Queryable, items: readonly ReleaseItem[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const att = attemptArrays(items);
  const res = await db.query<{ id: string }>({
    name: att ? 'acw_release_att' : 'acw_release',
    text: `with upd as (
        update job_queue j set status = 'pending', attempts = greatest(j.attempts - 1, 0),
          run_at = now() + t.delay * interval '1 millisecond', last_error = coalesce(t.error, j.last_error),
          parked_since = case t.park when 'unknown' then coalesce(j.parked_since, now()) when 'disabled' then null else j.parked_since end,
          skipped_since = case when t.park is null then j.skipped_since else coalesce(j.skipped_since, now()) end, ${CLEAR_LEASE}
        from unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::text[]) t(id, lease_token, delay, error, park)
        where ${HELD}
        returning j.id)${att ? att.cte(6, '(select id, false as dead from upd)') : ''}
      select id from upd`,
    values: [
      items.map((i) => i.leased.id),
      items.map((i) => i.leased.leaseToken),
      items.map((i) => Math.max(0, Math.round(i.delayMs))),
      items.map((i) => i.error ?? null),
      items.map((i) => i.park ?? null),
      ...(att?.values ?? []),
    ],
  });
  return new Set(res.rows.map((r) => r.id));
}
