import type pg from 'pg';
import { purgeTombstones } from '../endpoints/store.js';
import { dropLegacyAttempts, dropLegacyEvents } from '../history/upgrade.js';
import { dropPartition, ensureDaysAhead, eventDayNeeded, expiredPartitions, listPartitions } from '../history/partitions.js';
import type { Logger } from '../log.js';
import { quoteIdent } from '../db/sql.js';
import type { PeriodicRunner } from './scheduler.js';

/**
 * Retention (docs/operations.md#retention): what leaves, and how.
 * - Finished jobs and their attempts leave by whole days: the partition of a day is detached and
 *   dropped once the day is past its set's retention (completed, or dead and cancelled), so a job
 *   is kept at least its retention and at most a day longer. A retention under a day also deletes,
 *   in batches, the rows of the day that straddles it.
 * - Events leave by whole days too (event_log's partitions by the day of their id), kept as long as
 *   the longest job retention, plus a day, plus the longest a job can wait, so no history outlives
 *   its event; a day holding an event not dispatched yet, or one a live job names, is kept whole
 *   until it holds none. Idempotency keys leave by the day they were claimed, past
 *   notify.idempotency_retention.
 * - Everything else goes in bounded batches in index order, each statement short, none touching a
 *   live job: inbox messages (`notifications`: read ones past dead_retention, unread ones
 *   past notification_retention), audit rows past audit_retention (0 keeps them), delivery counts
 *   past the longest window anyone reads, expired dashboard sessions, deleted endpoints' names.
 * Days ahead are made here too, so inserts always find their partition.
 */
export interface PurgeOptions {
  completedRetentionMs: number;
  deadRetentionMs: number;
  /** 2xx response bodies older than this (whole days) are cleared, the attempt kept; 0 keeps them as long as the attempt. Default 0. */
  successBodyRetentionMs?: number;
  /** Audit rows older than this go; 0 keeps them forever. Default: a year. */
  auditRetentionMs?: number;
  /** Unread inbox messages (`notifications`) older than this go. Default: 90 days. */
  notificationRetentionMs?: number;
  /** The longest a job can wait before it goes dead (notify.webhook.max_age): events are kept past their jobs by this. Default: a day. */
  maxJobAgeMs?: number;
  /** Idempotency keys are kept at least this long (notify.idempotency_retention). Default: 24 hours. */
  idempotencyRetentionMs?: number;
  batchSize: number;
  /** Checked between batches: a shutdown does not wait for a long purge. */
  signal?: AbortSignal;
}

export interface PurgeCounts {
  /** Finished jobs removed, by set (whole days dropped, plus rows of a straddled day). */
  completed: number;
  dead: number;
  attempts: number;
  /** Day partitions dropped. */
  partitions: number;
  /** Response bodies of 2xx attempts cleared (success_body_retention). */
  success_bodies: number;
  /** Events removed with their day partitions. */
  events: number;
  /** Days of events past retention kept because an event of theirs is undispatched or named by a live job. */
  event_days_kept: number;
  /** Idempotency keys removed with their day partitions. */
  idempotency_keys: number;
  notifications: number;
  audit: number;
  delivery_stats: number;
  sessions: number;
  /** Deleted endpoints whose name was kept for their old jobs (docs/operations.md#endpoints-at-run-time). */
  endpoint_tombstones: number;
  /** Tables left by the upgrade to the history layout, dropped once past retention. */
  legacy_tables: number;
}

const DAY_MS = 86_400_000;
const YEAR_MS = 365 * DAY_MS;
/** GET /v1/endpoints reads up to a week of delivery counts. */
const STATS_KEEP_MS = 8 * DAY_MS;

/** Repeat one batch statement (its last parameter is the batch size) until it removes fewer rows than that. */
async function inBatches(pool: pg.Pool, sql: string, params: unknown[], batch: number, signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (;;) {
    const res = await pool.query<{ n: number }>(sql, [...params, batch]);
    const n = res.rows[0]?.n ?? 0;
    total += n;
    if (n < batch || signal?.aborted) return total;
  }
}

/** Whole days past retention, then (for a retention under a day) the rows of the day that straddles it. */
async function purgeHistory(pool: pg.Pool, opts: PurgeOptions, counts: PurgeCounts): Promise<void> {
  await ensureDaysAhead(pool);
  const now = (await pool.query<{ ms: number }>(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0]!.ms;
  const parts = await listPartitions(pool);
  const retentions = {
    completedMs: opts.completedRetentionMs,
    deadMs: opts.deadRetentionMs,
    eventsMs: eventsRetentionMs(opts),
    keysMs: opts.idempotencyRetentionMs ?? DAY_MS,
  };
  for (const p of expiredPartitions(parts, retentions, now)) {
    if (opts.signal?.aborted) return;
    if (p.set === 'event_log' && (await eventDayNeeded(pool, p))) {
      counts.event_days_kept++;
      continue;
    }
    const rows = await dropPartition(pool, p);
    counts.partitions++;
    if (p.set === 'job_history_completed') counts.completed += rows;
    else if (p.set === 'job_history_dead') counts.dead += rows;
    else if (p.set === 'event_log') counts.events += rows;
    else if (p.set === 'event_keys') counts.idempotency_keys += rows;
    else counts.attempts += rows;
  }
  const b = opts.batchSize;
  const bodyMs = opts.successBodyRetentionMs ?? 0;
  if (bodyMs > 0 && bodyMs < opts.completedRetentionMs) {
    const left = new Set(parts.map((p) => p.name));
    const due = parts.filter((p) => p.set === 'job_attempts_completed' && left.has(p.name) && p.to <= now - bodyMs);
    for (const p of due) {
      if (opts.signal?.aborted) return;
      counts.success_bodies += await clearSuccessBodies(pool, p.name, opts.signal);
    }
  }
  if (opts.completedRetentionMs < DAY_MS) {
    counts.completed += await inBatches(pool, STRADDLE_JOBS('job_history_completed'), [opts.completedRetentionMs], b, opts.signal);
    counts.attempts += await inBatches(pool, STRADDLE_ATTEMPTS('job_attempts_completed'), [opts.completedRetentionMs], b, opts.signal);
  }
  if (opts.deadRetentionMs < DAY_MS) {
    counts.dead += await inBatches(pool, STRADDLE_JOBS('job_history_dead'), [opts.deadRetentionMs], b, opts.signal);
    counts.attempts += await inBatches(pool, STRADDLE_ATTEMPTS('job_attempts_dead'), [opts.deadRetentionMs], b, opts.signal);
  }
}

/**
 * Clear the 2xx response bodies of one attempt partition, once (it is then marked in
 * history_cleared), walking it by ranges of pages (a TID range scan each), so every statement
 * reads a bounded part of it. Returns how many bodies were cleared.
 */
async function clearSuccessBodies(pool: pg.Pool, partition: string, signal?: AbortSignal): Promise<number> {
  const done = await pool.query(`select 1 from history_cleared where partition = $1`, [partition]);
  if ((done.rowCount ?? 0) > 0) return 0;
  const table = quoteIdent(partition);
  const size = await pool.query<{ pages: number }>(
    `select (pg_relation_size($1::regclass) / current_setting('block_size')::int)::int as pages`,
    [table],
  );
  const pages = size.rows[0]?.pages ?? 0;
  let cleared = 0;
  for (let from = 0; from < pages; from += BODY_PAGES) {
    if (signal?.aborted) return cleared;
    const res = await pool.query(
      `update ${table} set response_body = null
        where ctid >= format('(%s,0)', $1::int)::tid and ctid < format('(%s,0)', $2::int)::tid
          and response_body is not null and status_code between 200 and 299`,
      [from, from + BODY_PAGES],
    );
    cleared += res.rowCount ?? 0;
  }
  await pool.query(`insert into history_cleared (partition) values ($1) on conflict do nothing`, [partition]);
  return cleared;
}

/** Pages of an attempt partition one statement clears bodies in (about 6,000 attempts). */
const BODY_PAGES = 100;

// A day partition has no index on its own key: these read the (small) straddled partition in full,
// and only run for a retention under a day.
const STRADDLE_JOBS = (set: string): string => `with v as (
    select id, finished_at from ${set} where finished_at < now() - $1 * interval '1 millisecond' limit $2)
  , del as (delete from ${set} h using v where h.id = v.id and h.finished_at = v.finished_at returning 1)
  select count(*)::int as n from del`;
const STRADDLE_ATTEMPTS = (set: string): string => `with v as (
    select id, created_at from ${set} where created_at < now() - $1 * interval '1 millisecond' limit $2)
  , del as (delete from ${set} a using v where a.id = v.id and a.created_at = v.created_at returning 1)
  select count(*)::int as n from del`;

/**
 * Events outlive every job they made: kept for the longest job retention, plus a day (a partition
 * of history is dropped up to a day late), plus the longest a job waits before it finishes.
 */
export function eventsRetentionMs(opts: PurgeOptions): number {
  return Math.max(opts.completedRetentionMs, opts.deadRetentionMs) + DAY_MS + (opts.maxJobAgeMs ?? DAY_MS);
}

export async function purgeOld(pool: pg.Pool, opts: PurgeOptions): Promise<PurgeCounts> {
  const counts: PurgeCounts = {
    completed: 0,
    dead: 0,
    attempts: 0,
    partitions: 0,
    success_bodies: 0,
    events: 0,
    event_days_kept: 0,
    idempotency_keys: 0,
    notifications: 0,
    audit: 0,
    delivery_stats: 0,
    sessions: 0,
    endpoint_tombstones: 0,
    legacy_tables: 0,
  };
  const { signal, batchSize: b } = opts;
  await purgeHistory(pool, opts, counts);
  counts.legacy_tables = await dropLegacyAttempts(pool, opts.deadRetentionMs);
  counts.legacy_tables += await dropLegacyEvents(pool, eventsRetentionMs(opts));
  counts.notifications = await inBatches(
    pool,
    `with v as (
       select id from notifications where read_at is not null and read_at < now() - $1 * interval '1 millisecond'
       order by read_at limit $2 for update skip locked),
     del as (delete from notifications n using v where n.id = v.id returning 1)
     select count(*)::int as n from del`,
    [opts.deadRetentionMs],
    b,
    signal,
  );
  // Unread ones (and audit rows below) by the primary key, whose order is creation order: each batch
  // takes the oldest rows and deletes those past retention; a batch that meets a newer one is the last.
  counts.notifications += await inBatches(
    pool,
    `with v as (select id, created_at from notifications where read_at is null order by id limit $2),
     del as (delete from notifications n using v where n.id = v.id and v.created_at < now() - $1 * interval '1 millisecond' returning 1)
     select count(*)::int as n from del`,
    [opts.notificationRetentionMs ?? 90 * DAY_MS],
    b,
    signal,
  );
  const auditMs = opts.auditRetentionMs ?? YEAR_MS;
  if (auditMs > 0) {
    counts.audit = await inBatches(
      pool,
      `with v as (select id, created_at from audit_log order by id limit $2),
       del as (delete from audit_log a using v where a.id = v.id and v.created_at < now() - $1 * interval '1 millisecond' returning 1)
       select count(*)::int as n from del`,
      [auditMs],
      b,
      signal,
    );
  }
  counts.delivery_stats = await inBatches(
    pool,
    `with v as (select minute, endpoint, slot from delivery_stats where minute < now() - $1 * interval '1 millisecond' order by minute limit $2),
     del as (delete from delivery_stats s using v where (s.minute, s.endpoint, s.slot) = (v.minute, v.endpoint, v.slot) returning 1)
     select count(*)::int as n from del`,
    [STATS_KEEP_MS],
    b,
    signal,
  );
  counts.delivery_stats += await inBatches(
    pool,
    `with v as (select minute, slot from job_counts where minute < now() - interval '2 days' order by minute limit $1),
     del as (delete from job_counts c using v where (c.minute, c.slot) = (v.minute, v.slot) returning 1)
     select count(*)::int as n from del`,
    [],
    b,
    signal,
  );
  counts.sessions = await inBatches(
    pool,
    `with v as (select id_hash from sessions where expires_at < now() order by expires_at limit $1),
     del as (delete from sessions s using v where s.id_hash = v.id_hash returning 1)
     select count(*)::int as n from del`,
    [],
    b,
    signal,
  );
  counts.endpoint_tombstones = await purgeTombstones(pool, opts.deadRetentionMs);
  return counts;
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
