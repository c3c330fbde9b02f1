import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { PeriodicRunner } from '../runners/scheduler.js';
import { ensurePartitions } from './partitions.js';

/**
 * The upgrade of a database that held jobs before the history layout (migration 0010,
 * docs/operations.md#upgrading). The migration only renamed the old tables, so that it took no long
 * lock; this runner does the moving, in short batches, while the service runs:
 * 1. pending and running jobs of `jobs_v1` go to `job_queue` at once, where workers claim them;
 * 2. finished ones go to `job_history` (those already past retention are dropped instead);
 * 3. once `jobs_v1` is empty, the `jobs` view is made without it and the table is dropped.
 * The old attempts (`webhook_attempts_v1`) stay readable through the `webhook_attempts` view and are
 * dropped whole once dead_retention has passed since the upgrade (dropLegacyAttempts).
 * Operator moves on a job still in `jobs_v1` bring it over first (promoteLegacyJobs).
 */

/** A retention long enough to keep any row (a century), for moves an operator asked for. */
const KEEP_ALL_MS = 100 * 365 * 86_400_000;

const COLUMNS = `id, type, payload, status, attempts, max_attempts, run_at, locked_by, lease_token, lease_expires_at,
  last_error, created_at, updated_at, event_id, endpoint, parked_since, skipped_since, series_started_at`;

/** Does the old jobs table still exist? A catalog lookup, cheap enough for every operator move. */
export async function hasLegacyJobs(db: Queryable): Promise<boolean> {
  const res = await db.query<{ t: string | null }>(`select to_regclass('jobs_v1')::text as t`);
  return res.rows[0]?.t != null;
}

/** Is the events table of the layout before day partitions (migration 0012) still kept? */
export async function hasLegacyEvents(db: Queryable): Promise<boolean> {
  const res = await db.query<{ t: string | null }>(`select to_regclass('events_v1')::text as t`);
  return res.rows[0]?.t != null;
}

/**
 * Drop the old events table (migration 0012) once its newest event is past the events retention
 * (every event in it is older than the upgrade) and none of it waits to be dispatched: the `events`
 * view is made without it first, in one short transaction that gives up rather than queue behind a
 * long read. Returns 1 when it dropped it.
 */
export async function dropLegacyEvents(pool: pg.Pool, eventsRetentionMs: number): Promise<number> {
  const res = await pool.query<{ due: boolean | null }>(
    `select (select applied_at from acw_migrations where id = 12) < now() - $1 * interval '1 millisecond' as due
      where to_regclass('events_v1') is not null`,
    [eventsRetentionMs],
  );
  if (res.rows[0]?.due !== true) return 0;
  const client = await pool.connect();
  try {
    await client.query(`begin; set local lock_timeout = '1s'`);
    const waiting = await client.query(`select 1 from events_v1 where dispatched_at is null limit 1`);
    if ((waiting.rowCount ?? 0) > 0) {
      await client.query('rollback');
      return 0;
    }
    await client.query(`select acw_define_event_views(false)`);
    await client.query(`drop table events_v1`);
    await client.query('commit');
    return 1;
  } catch {
    await client.query('rollback').catch(() => undefined);
    return 0;
  } finally {
    client.release();
  }
}

/** Move up to `batch` live jobs of jobs_v1 into job_queue; returns how many moved. */
export async function moveLegacyLive(db: Queryable, batch: number, jobsChannel: string): Promise<number> {
  const res = await db.query<{ n: number }>(
    `with v as (select id from jobs_v1 where status in ('pending', 'running') limit $1 for update skip locked),
       moved as (delete from jobs_v1 j using v where j.id = v.id returning j.*),
       ins as (insert into job_queue (${COLUMNS}) select ${COLUMNS} from moved on conflict (id) do nothing returning 1)
     select count(*)::int as n, (select pg_notify($2, '') where exists (select 1 from ins)) is null as _n from moved`,
    [batch, jobsChannel],
  );
  return res.rows[0]?.n ?? 0;
}

/** The history columns of a finished jobs_v1 row (`moved`), and the condition that it is still within retention. */
const TO_HISTORY = `insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at,
    finished_at, event_id, endpoint, topic, series_started_at)
  select id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at,
    f.finished_at, event_id, endpoint, payload->>'topic', series_started_at
  from moved cross join lateral (select case when status = 'completed' then coalesce(completed_at, updated_at) else updated_at end as finished_at) f
  where f.finished_at >= now() - (case when status = 'completed' then $2::float8 else $3::float8 end) * interval '1 millisecond'`;

/** Which jobs_v1 rows: a condition on its columns, `param(i)` being the placeholder of `values[i]`. */
export interface LegacyMatch {
  where: (param: (i: number) => string) => string;
  values: unknown[];
}

export interface HistoryRetentions {
  completedMs: number;
  deadMs: number;
}

/**
 * Move up to `batch` finished jobs of jobs_v1 (those `only` matches, or any) into job_history, making the day partitions they need first. Returns how many
 * left jobs_v1 (moved, or dropped as past retention).
 */
async function moveLegacyFinished(db: Queryable, batch: number, r: HistoryRetentions, only?: LegacyMatch): Promise<number> {
  const values = only?.values ?? [];
  const cond = (first: number): string =>
    `status in ('completed', 'dead', 'cancelled') and ${only ? only.where((i) => `$${first + i}`) : 'true'}`;
  const span = await db.query<{ lo: number | null; hi: number | null }>(
    `select extract(epoch from min(f))::float8 * 1000 as lo, extract(epoch from max(f))::float8 * 1000 as hi from (
       select case when status = 'completed' then coalesce(completed_at, updated_at) else updated_at end as f
       from jobs_v1 where ${cond(2)} limit $1) s`,
    [batch, ...values],
  );
  const { lo, hi } = span.rows[0] ?? { lo: null, hi: null };
  if (lo === null || hi === null) return 0;
  // Rows already past retention are dropped, not moved: no partition is made for them.
  await ensurePartitions(db, Math.max(lo, Date.now() - Math.max(r.completedMs, r.deadMs)), Math.max(hi, Date.now()));
  const res = await db.query<{ n: number }>(
    `with v as (select id from jobs_v1 where ${cond(4)} limit $1 for update skip locked),
       moved as (delete from jobs_v1 j using v where j.id = v.id returning j.*),
       ins as (${TO_HISTORY} returning 1)
     select count(*)::int as n from moved`,
    [batch, r.completedMs, r.deadMs, ...values],
  );
  return res.rows[0]?.n ?? 0;
}

/**
 * Bring finished jobs of jobs_v1 that an operator move is about to act on into job_history, so that
 * the move finds them where it looks.
 * A no-op once the old table is gone.
 */
export async function promoteLegacyJobs(client: Queryable, only: LegacyMatch): Promise<number> {
  if (!(await hasLegacyJobs(client))) return 0;
  let total = 0;
  for (;;) {
    // Whatever its age: the move asked for it (the purge drops what is past retention later).
    const n = await moveLegacyFinished(client, 1000, { completedMs: KEEP_ALL_MS, deadMs: KEEP_ALL_MS }, only);
    total += n;
    if (n < 1000) return total;
  }
}

/**
 * Once jobs_v1 is empty: the `jobs` view without it, then the table dropped, in one short
 * transaction that gives up (to try again next run) rather than queue behind a long read.
 */
async function dropLegacyJobs(pool: pg.Pool, log: Logger): Promise<boolean> {
  const client = await pool.connect();
  try {
    await client.query(`begin; set local lock_timeout = '1s'`);
    const left = await client.query<{ n: number }>(`select count(*)::int as n from (select 1 from jobs_v1 limit 1) s`);
    if ((left.rows[0]?.n ?? 0) > 0) {
      await client.query('rollback');
      return false;
    }
    const attempts = await client.query<{ t: string | null }>(`select to_regclass('webhook_attempts_v1')::text as t`);
    await client.query(`select acw_define_views(false, $1)`, [attempts.rows[0]?.t != null]);
    await client.query(`drop table jobs_v1`);
    await client.query('commit');
    log.info({ event: 'history.upgrade_done' }, 'every job of the old layout has moved; jobs_v1 dropped');
    return true;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    log.debug({ event: 'history.upgrade_retry', err: (err as Error).message }, 'could not drop jobs_v1 yet');
    return false;
  } finally {
    client.release();
  }
}

/**
 * Drop the old attempts table once dead_retention has passed since the upgrade (every attempt in
 * it is older than that). Returns 1 when it dropped it.
 */
export async function dropLegacyAttempts(pool: pg.Pool, deadRetentionMs: number): Promise<number> {
  const res = await pool.query<{ due: boolean | null }>(
    `select (select applied_at from acw_migrations where id = 10) < now() - $1 * interval '1 millisecond' as due
      where to_regclass('webhook_attempts_v1') is not null`,
    [deadRetentionMs],
  );
  if (res.rows[0]?.due !== true) return 0;
  const client = await pool.connect();
  try {
    await client.query(`begin; set local lock_timeout = '1s'`);
    await client.query(`select acw_define_views(to_regclass('jobs_v1') is not null, false)`);
    await client.query(`drop table webhook_attempts_v1`);
    await client.query('commit');
    return 1;
  } catch {
    await client.query('rollback').catch(() => undefined);
    return 0;
  } finally {
    client.release();
  }
}

/**
 * The runner: while jobs_v1 exists, every few seconds, in every process (SKIP LOCKED shares the
 * rows out): live jobs first, then history, a bounded number of batches per run.
 */
export function historyUpgrade(opts: { retentions: HistoryRetentions; jobsChannel: string; batch?: number }): PeriodicRunner {
  const batch = opts.batch ?? 2000;
  let done = false;
  return {
    name: 'history_upgrade',
    intervalMs: 5_000,
    cluster: false,
    run: async ({ pool, log, signal }) => {
      if (done) return;
      if (!(await hasLegacyJobs(pool))) {
        done = true;
        return;
      }
      let live = 0;
      let finished = 0;
      const until = Date.now() + 4_000;
      while (!signal.aborted && Date.now() < until) {
        const n = await moveLegacyLive(pool, batch, opts.jobsChannel);
        live += n;
        if (n < batch) break;
      }
      while (!signal.aborted && Date.now() < until) {
        const n = await moveLegacyFinished(pool, batch, opts.retentions);
        finished += n;
        if (n < batch) break;
      }
      if (live + finished > 0) {
        log.info({ event: 'history.upgrade_moved', live, finished }, 'moved jobs of the old layout');
      } else if (await dropLegacyJobs(pool, log)) {
        done = true;
      }
    },
  };
}
