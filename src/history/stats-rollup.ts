import type { Queryable } from '../db/pool.js';
import type { PeriodicRunner } from '../runners/scheduler.js';

/**
 * The per-minute counters folded once their minute is over (docs/architecture.md#live-jobs-and-history).
 *
 * The outcome statements write `delivery_stats` and `job_counts` one row per minute, endpoint and
 * writing connection's slot (`pg_backend_pid() % 64`; 0 for writes through the views), so that
 * concurrent writers never wait on one row. A pool of ten connections leaves ten rows per endpoint
 * and minute: 288,000 rows a day for 20 endpoints, which is what `GET /v1/stats` and
 * `GET /v1/endpoints` added up. Once a minute is settled its slots say nothing, and this step folds
 * them away. Slots below 0 are its own, which no writer uses:
 *
 * - FOLDED (-1): one row per endpoint and minute, the sum of every slot row folded into it (counts
 *   and duration buckets summed element-wise, the newest `last_at`, the newest error with its time).
 *   The health figures (`deliveryHealth`) add up these and the slot rows not folded yet.
 * - TOTAL (-2, endpoint ''): one row per minute, the FOLDED rows' counts over every endpoint (`ok`,
 *   `failed`, `permanent`, `last_at`; no buckets, no error). The charts (`deliveryBuckets`) add up
 *   these and the slot rows not folded yet: a day is 1,440 rows whatever the number of endpoints.
 *   A sum over the whole table counts a folded attempt twice: every reader picks its slots.
 * - `job_counts` keeps one FOLDED row per minute.
 *
 * Exact: one statement deletes a batch of slot rows and adds them to both, so every read answers
 * the same before and after; everything written goes to a slot of 0 or more and through the fold
 * once. The live writer never waits on it: only minutes ended SETTLE_MINUTES ago are folded, and a
 * slot row that someone holds (a late write from a long transaction) is skipped, not waited for. A
 * write that lands in a minute already folded (an operator's insert through the `webhook_attempts`
 * view, a long transaction) makes a slot row again, which a later run folds. Bounded: each
 * statement folds at most `batch` slot rows, in key order; the first run of a process starts from
 * the oldest minute kept, later runs from an hour before the last cutoff.
 */

/** Minutes this long past their end are settled: the outcome statements write the minute of their own now(). */
export const SETTLE_MINUTES = 2;

/** The rollup's own slots: one row per endpoint and minute, and one per minute over every endpoint. */
export const FOLDED = -1;
export const TOTAL = -2;

/** Slot rows one statement folds at most. */
export const ROLLUP_BATCH = 5_000;

/** How far back each run looks again for slot rows written into minutes already folded. */
const LOOKBACK_MS = 3_600_000;

const FOLD_DELIVERY_STATS = `with v as (
    select minute, endpoint, slot from delivery_stats
     where minute >= $1 and minute < $2 and slot >= 0
     order by minute, endpoint, slot limit $3
     for update skip locked),
  d as (
    delete from delivery_stats s using v where s.minute = v.minute and s.endpoint = v.endpoint and s.slot = v.slot
    returning s.*),
  b as (
    select minute, endpoint, array_agg(n order by k)::int[] as buckets from (
      select d.minute, d.endpoint, u.k, sum(u.n)::int as n
        from d cross join lateral unnest(d.buckets) with ordinality u(n, k) group by 1, 2, 3) x
     group by 1, 2),
  e as (
    select d.minute, d.endpoint, sum(d.ok)::int as ok, sum(d.failed)::int as failed, sum(d.permanent)::int as permanent,
      coalesce(b.buckets, '{}') as buckets, max(d.last_at) as last_at,
      (array_agg(d.last_error order by d.last_error_at desc) filter (where d.last_error_at is not null))[1] as last_error,
      max(d.last_error_at) as last_error_at
    from d left join b on b.minute = d.minute and b.endpoint = d.endpoint
    group by d.minute, d.endpoint, b.buckets),
  f as (
    insert into delivery_stats as s (minute, endpoint, slot, ok, failed, permanent, buckets, last_at, last_error, last_error_at)
    select minute, endpoint, ${FOLDED}, ok, failed, permanent, buckets, last_at, last_error, last_error_at from e
    -- Rows locked in key order: two folds at once never wait on each other crosswise.
    order by 1, 2
    on conflict (minute, endpoint, slot) do update set
      ok = s.ok + excluded.ok, failed = s.failed + excluded.failed, permanent = s.permanent + excluded.permanent,
      buckets = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(s.buckets, excluded.buckets) u(x, y)),
      last_at = greatest(s.last_at, excluded.last_at),
      last_error = case when s.last_error_at is null or excluded.last_error_at > s.last_error_at
        then coalesce(excluded.last_error, s.last_error) else s.last_error end,
      last_error_at = greatest(s.last_error_at, excluded.last_error_at)
    returning 1),
  t as (
    insert into delivery_stats as s (minute, endpoint, slot, ok, failed, permanent, buckets, last_at)
    select minute, '', ${TOTAL}, sum(ok)::int, sum(failed)::int, sum(permanent)::int, '{}', max(last_at) from e
    group by minute order by minute
    on conflict (minute, endpoint, slot) do update set
      ok = s.ok + excluded.ok, failed = s.failed + excluded.failed, permanent = s.permanent + excluded.permanent,
      last_at = greatest(s.last_at, excluded.last_at)
    returning 1)
  select (select count(*)::int from d) as folded, (select count(*)::int from v) as seen, (select max(minute) from v) as upto`;

const FOLD_JOB_COUNTS = `with v as (
    select minute, slot from job_counts
     where minute >= $1 and minute < $2 and slot >= 0
     order by minute, slot limit $3
     for update skip locked),
  d as (delete from job_counts c using v where c.minute = v.minute and c.slot = v.slot returning c.*),
  f as (
    insert into job_counts as c (minute, slot, completed, dead, cancelled)
    select minute, ${FOLDED}, sum(completed)::int, sum(dead)::int, sum(cancelled)::int from d group by minute order by minute
    on conflict (minute, slot) do update set
      completed = c.completed + excluded.completed, dead = c.dead + excluded.dead, cancelled = c.cancelled + excluded.cancelled
    returning 1)
  select (select count(*)::int from d) as folded, (select count(*)::int from v) as seen, (select max(minute) from v) as upto`;

export interface RollupCounts {
  /** Slot rows folded, per table. */
  delivery_stats: number;
  job_counts: number;
  /** Fold statements run. */
  statements: number;
}

/** Where each table's fold goes on from: the minute it stopped at, or where to look again once it finished. */
export interface RollupCursor {
  delivery_stats: Date;
  job_counts: Date;
}

export interface RollupOptions {
  /** Fold minutes from here on (default: each table's oldest minute kept). */
  from?: RollupCursor;
  batch?: number;
  signal?: AbortSignal;
  /** Stop after this many ms, checked after each statement (so each table gets at least one); a call from `next` goes on. Default: no limit. */
  budgetMs?: number;
}

export interface RollupResult extends RollupCounts {
  /** Both tables folded up to the cutoff (not stopped by the budget or the signal). */
  done: boolean;
  /** The `from` of the next call: where a table stopped, or an hour before the cutoff once it finished. */
  next: RollupCursor;
}

/** The first minute that is not settled yet (database clock): everything before it may be folded. */
export async function settledBefore(db: Queryable): Promise<Date> {
  const res = await db.query<{ t: Date }>({
    name: 'acw_rollup_cutoff',
    text: `select date_bin('1 minute', now(), timestamptz 'epoch') - $1::int * interval '1 minute' as t`,
    values: [SETTLE_MINUTES],
  });
  return res.rows[0]!.t;
}

/** Fold one table from `from` up to `until`, batch by batch, walking the key forward; null once finished, else where it stopped. */
async function foldTable(
  db: Queryable,
  table: keyof RollupCursor,
  from: Date,
  until: Date,
  batch: number,
  counts: RollupCounts,
  stop: () => boolean,
): Promise<Date | null> {
  const sql = table === 'delivery_stats' ? FOLD_DELIVERY_STATS : FOLD_JOB_COUNTS;
  let at = from;
  for (;;) {
    const res = await db.query<{ folded: number; seen: number; upto: Date | null }>(sql, [at, until, batch]);
    const r = res.rows[0]!;
    counts[table] += r.folded;
    counts.statements++;
    if (r.seen < batch) return null;
    // The batch may have ended inside a minute: the next one starts at that minute again.
    if (r.upto) at = r.upto;
    if (stop()) return at;
  }
}

/**
 * Fold the settled minutes' slot rows of `delivery_stats` and `job_counts` (see above),
 * each table from its `from` (default: its oldest minute) to the cutoff.
 */
export async function rollupCounters(db: Queryable, opts: RollupOptions = {}): Promise<RollupResult> {
  const started = Date.now();
  const batch = opts.batch ?? ROLLUP_BATCH;
  const counts: RollupCounts = { delivery_stats: 0, job_counts: 0, statements: 0 };
  const until = await settledBefore(db);
  const stop = (): boolean => opts.signal?.aborted === true || (opts.budgetMs !== undefined && Date.now() - started >= opts.budgetMs);
  let from = opts.from;
  if (!from) {
    const res = await db.query<{ s: Date | null; c: Date | null }>(
      `select (select min(minute) from delivery_stats) as s, (select min(minute) from job_counts) as c`,
    );
    from = { delivery_stats: res.rows[0]?.s ?? until, job_counts: res.rows[0]?.c ?? until };
  }
  const again = new Date(until.getTime() - LOOKBACK_MS);
  const next: RollupCursor = { ...from };
  let done = true;
  for (const table of ['delivery_stats', 'job_counts'] as const) {
    const stopped = await foldTable(db, table, from[table], until, batch, counts, stop);
    next[table] = stopped ?? again;
    if (stopped) done = false;
  }
  return { ...counts, done, next };
}

/**
 * The runner: every minute across the cluster. A process's first run walks every minute kept (a
 * database whose counters were never folded, or a restart); later runs fold the last hour or so.
 * A run stops after 20 s and the next one goes on from there.
 */
export function statsRollup(opts: { batch?: number } = {}): PeriodicRunner {
  let from: RollupCursor | undefined;
  return {
    name: 'stats_rollup',
    intervalMs: 60_000,
    cluster: true,
    run: async ({ pool, log, signal }) => {
      const r = await rollupCounters(pool, { from, batch: opts.batch, signal, budgetMs: 20_000 });
      from = r.next;
      if (r.delivery_stats + r.job_counts > 0) {
        log.debug(
          { event: 'stats.rolled_up', delivery_stats: r.delivery_stats, job_counts: r.job_counts, statements: r.statements, done: r.done },
          'folded per-minute counters',
        );
      }
    },
  };
}
