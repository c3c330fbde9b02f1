import type pg from 'pg';
import type { PeriodicRunner } from '../runners/scheduler.js';
import type { Queryable } from '../db/pool.js';
import { quoteIdent } from '../db/sql.js';
import { uuidFloor } from '../notify/event-id.js';

/**
 * The day partitions of the history tables and of the events (docs/architecture.md#live-jobs-and-history,
 * #events-by-day): each of the partitioned sets below holds one partition per UTC day, named
 * `<set>_pYYYYMMDD`, made a few days ahead and dropped as a whole once the day is past its set's
 * retention. Making one (`acw_make_partitions`, migrations 0010 and 0012) attaches a table already
 * checked against its bounds, and dropping one detaches it CONCURRENTLY first: neither takes a
 * lock that stops the live path.
 */

/**
 * Which retention each partitioned set keeps: its jobs' `completed_retention` or `dead_retention`,
 * the events' (outliving every job: purge.ts), or the idempotency keys' (notify.idempotency_retention).
 */
export const PARTITIONED_SETS = {
  job_history_completed: 'completed',
  job_history_dead: 'dead',
  job_attempts_completed: 'completed',
  job_attempts_dead: 'dead',
  event_log: 'events',
  event_keys: 'keys',
} as const;

export type PartitionedSet = keyof typeof PARTITIONED_SETS;

const DAY_MS = 86_400_000;

/** Days made ahead of today, so that a process down for a few days comes back to partitions that exist. */
export const DAYS_AHEAD = 7;

export interface Partition {
  set: PartitionedSet;
  name: string;
  /** Start of its UTC day (inclusive) and of the next (exclusive), epoch ms. */
  from: number;
  to: number;
  /** A DETACH CONCURRENTLY that did not finish (its process died): finalized before the drop. */
  detachPending: boolean;
}

/** `2026-12-02` for a UTC day. */
export function utcDay(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

function partitionDay(name: string): number | null {
  const m = /_p(\d{4})(\d{2})(\d{2})$/.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null;
}

/**
 * Make the day partitions of every set from `fromMs`'s day to `toMs`'s day (both included) that do
 * not exist yet. Returns how many were made. Safe to call from any number of processes at once.
 */
export async function ensurePartitions(db: Queryable, fromMs: number, toMs: number): Promise<number> {
  const res = await db.query<{ n: number }>({
    name: 'acw_ensure_partitions',
    text: `select coalesce(sum(acw_make_partitions(d::date)), 0)::int as n from generate_series($1::date, $2::date, interval '1 day') d`,
    values: [utcDay(fromMs), utcDay(toMs)],
  });
  return res.rows[0]?.n ?? 0;
}

/** The day partitions there are now, oldest first. */
export async function listPartitions(db: Queryable): Promise<Partition[]> {
  const res = await db.query<{ set: PartitionedSet; name: string; pending: boolean }>(
    `select p.relname as set, c.relname as name, i.inhdetachpending as pending
       from pg_inherits i
       join pg_class c on c.oid = i.inhrelid
       join pg_class p on p.oid = i.inhparent
      where p.relnamespace = current_schema()::regnamespace and p.relname = any($1::text[])`,
    [Object.keys(PARTITIONED_SETS)],
  );
  const out: Partition[] = [];
  for (const r of res.rows) {
    const from = partitionDay(r.name);
    if (from === null) continue;
    out.push({ set: r.set, name: r.name, from, to: from + DAY_MS, detachPending: r.pending });
  }
  return out.toSorted((a, b) => a.from - b.from || a.name.localeCompare(b.name));
}

export interface Retentions {
  completedMs: number;
  deadMs: number;
  /** Unset: events are kept (none of their days is expired). */
  eventsMs?: number;
  /** Unset: idempotency keys are kept. */
  keysMs?: number;
}

/** The partitions whose whole day is past their set's retention at `nowMs`. */
export function expiredPartitions(parts: readonly Partition[], r: Retentions, nowMs: number): Partition[] {
  const keep = { completed: r.completedMs, dead: r.deadMs, events: r.eventsMs ?? Infinity, keys: r.keysMs ?? Infinity };
  return parts.filter((p) => p.to <= nowMs - keep[PARTITIONED_SETS[p.set]]);
}

/**
 * Does a day of event_log hold an event that must stay: one not dispatched yet, or one that a job
 * names, live (a dead job redriven, a delivery still retrying) or kept in history (one sent again
 * long after its event: a redrive, a retry or a replay that went dead again, kept its own
 * retention from then)? A job of an event makes its body from it (docs/architecture.md#bodies-by-reference),
 * so a retry of it needs it. Such a day is kept whole, and looked at again by the next purge. A read
 * of the partition's undispatched index and of the event ids of job_queue and job_history (each
 * partition's `event_id` index) in the day's range. A job sent on time has left history by then.
 */
export async function eventDayNeeded(db: Queryable, p: Partition): Promise<boolean> {
  const res = await db.query<{ needed: boolean }>(
    `select exists (select 1 from ${quoteIdent(p.name)} where dispatched_at is null)
         or exists (select 1 from job_queue where event_id >= $1::uuid and event_id < $2::uuid)
         or exists (select 1 from job_history where event_id >= $1::uuid and event_id < $2::uuid) as needed`,
    [uuidFloor(p.from), uuidFloor(p.to)],
  );
  return res.rows[0]?.needed === true;
}

/**
 * Detach one partition CONCURRENTLY (which must not run inside a transaction, so on a connection of
 * its own in autocommit) and drop it. A detach left half done by a process that died is finished
 * first. Returns the rows it held, as counted before the drop (an estimate from the statistics
 * above 100,000 rows, so the count itself stays cheap).
 */
export async function dropPartition(pool: pg.Pool, p: Partition): Promise<number> {
  const client = await pool.connect();
  try {
    const rows = await countRows(client, p.name);
    const child = quoteIdent(p.name);
    // First say the day is gone, so that no new statement moves rows into it (history_bounds).
    await client.query(`update history_bounds set oldest = greatest(oldest, to_timestamp($2::float8 / 1000)) where set = $1`, [
      p.set,
      p.to,
    ]);
    if (p.detachPending) await client.query(`alter table ${quoteIdent(p.set)} detach partition ${child} finalize`);
    else await client.query(`alter table ${quoteIdent(p.set)} detach partition ${child} concurrently`);
    await client.query(`drop table ${child}`);
    await client.query(`delete from history_cleared where partition = $1`, [p.name]);
    return rows;
  } finally {
    client.release();
  }
}

async function countRows(db: Queryable, name: string): Promise<number> {
  const est = await db.query<{ n: number }>(`select greatest(reltuples, 0)::float8 as n from pg_class where oid = $1::regclass`, [
    quoteIdent(name),
  ]);
  const estimate = est.rows[0]?.n ?? 0;
  if (estimate > 100_000) return Math.round(estimate);
  const res = await db.query<{ n: number }>(`select count(*)::int as n from ${quoteIdent(name)}`);
  return res.rows[0]?.n ?? 0;
}

/**
 * Make sure today and the next DAYS_AHEAD days have their partitions, and yesterday in the first
 * hour of the day (database clock): a statement begun before midnight still writes yesterday's date
 * just after it. Past that hour a day that the purge dropped (a retention under a day) is not made
 * again, to be dropped again at the next run.
 */
export async function ensureDaysAhead(db: Queryable): Promise<number> {
  const res = await db.query<{ n: number }>({
    name: 'acw_ensure_days_ahead',
    text: `select coalesce(sum(acw_make_partitions(d::date)), 0)::int as n
      from generate_series(((now() - interval '1 hour') at time zone 'UTC')::date, (now() at time zone 'UTC')::date + $1::int, interval '1 day') d`,
    values: [DAYS_AHEAD],
  });
  return res.rows[0]?.n ?? 0;
}

/**
 * The runner that keeps the days ahead made, hourly across the cluster, whether or not the purge
 * runs: inserts into job_history and job_attempts must always find their day.
 */
export function historyPartitions(): PeriodicRunner {
  return {
    name: 'history_partitions',
    intervalMs: 3_600_000,
    cluster: true,
    run: async ({ pool, log }) => {
      const made = await ensureDaysAhead(pool);
      if (made > 0) log.info({ event: 'history.partitions_made', partitions: made }, 'made day partitions ahead');
    },
  };
}

/** The error of a row that no partition takes (a day not made): check_violation on a partitioned table. */
export function isMissingPartition(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '23514' && typeof e.message === 'string' && e.message.includes('no partition of relation');
}
