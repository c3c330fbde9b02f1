import { purgeTombstones } from '../endpoints/store.js';
import type pg from 'pg';
import type { Logger } from '../log.js';
import type { PeriodicRunner } from './scheduler.js';

export interface PurgeOptions {
  completedRetentionMs: number;
  deadRetentionMs: number;
  batchSize: number;
  /** Checked between batches: a shutdown does not wait for a long purge. */
  signal?: AbortSignal;
}

export interface PurgeCounts {
  completed: number;
  dead: number;
  events: number;
  notifications: number;
  /** Deleted endpoints whose name was kept for their old jobs (docs/operations.md#endpoints-at-run-time). */
  endpoint_tombstones: number;
}

/** Idempotency keys live on events; whatever the retention, they are kept at least this long. */
const MIN_EVENT_RETENTION_MS = 24 * 3600_000;

/** Delete finished jobs (with their attempt rows) matching `where`, in bounded batches. */
async function purgeJobs(pool: pg.Pool, where: string, retentionMs: number, batch: number, signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (;;) {
    const res = await pool.query<{ n: number }>(
      `with victims as (
         select id from jobs where ${where} < now() - $1 * interval '1 millisecond' limit $2 for update skip locked),
       att as (delete from webhook_attempts a using victims v where a.job_id = v.id),
       del as (delete from jobs j using victims v where j.id = v.id returning 1)
       select count(*)::int as n from del`,
      [retentionMs, batch],
    );
    const n = res.rows[0]?.n ?? 0;
    total += n;
    if (n < batch || signal?.aborted) return total;
  }
}

async function purgeBatched(pool: pg.Pool, sql: string, params: unknown[], batch: number, signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (;;) {
    const res = await pool.query<{ n: number }>(sql, [...params, batch]);
    const n = res.rows[0]?.n ?? 0;
    total += n;
    if (n < batch || signal?.aborted) return total;
  }
}

/**
 * Retention (docs/operations.md#periodic-runners): completed jobs past completed_retention and dead or cancelled ones past
 * dead_retention go with their webhook_attempts; events with no job left past completed_retention;
 * read inbox messages (`notifications`) past dead_retention. audit_log is kept.
 */
export async function purgeOld(pool: pg.Pool, opts: PurgeOptions): Promise<PurgeCounts> {
  const b = opts.batchSize;
  const { signal } = opts;
  const completed = await purgeJobs(pool, `status = 'completed' and completed_at`, opts.completedRetentionMs, b, signal);
  const dead = await purgeJobs(pool, `status in ('dead', 'cancelled') and updated_at`, opts.deadRetentionMs, b, signal);
  const events = await purgeBatched(
    pool,
    `with victims as (
       select e.id from events e
       where e.dispatched_at is not null and e.created_at < now() - $1 * interval '1 millisecond'
         and not exists (select 1 from jobs j where j.event_id = e.id)
       limit $2 for update skip locked),
     del as (delete from events e using victims v where e.id = v.id returning 1)
     select count(*)::int as n from del`,
    [Math.max(opts.completedRetentionMs, MIN_EVENT_RETENTION_MS)],
    b,
    signal,
  );
  const notifications = await purgeBatched(
    pool,
    `with victims as (
       select id from notifications where read_at is not null and read_at < now() - $1 * interval '1 millisecond'
       limit $2 for update skip locked),
     del as (delete from notifications n using victims v where n.id = v.id returning 1)
     select count(*)::int as n from del`,
    [opts.deadRetentionMs],
    b,
    signal,
  );
  const tombstones = await purgeTombstones(pool, opts.deadRetentionMs);
  return { completed, dead, events, notifications, endpoint_tombstones: tombstones };
}

export function jobPurge(opts: PurgeOptions & { intervalMs: number }): PeriodicRunner {
  return {
    name: 'job_purge',
    intervalMs: opts.intervalMs,
    cluster: true,
    run: async ({ pool, log, signal }: { pool: pg.Pool; log: Logger; signal: AbortSignal }) => {
      const counts = await purgeOld(pool, { ...opts, signal });
      log.info({ event: 'job.purged', ...counts }, 'purged rows past retention');
    },
  };
}
