import type { Queryable } from '../db/pool.js';
import { DURATION_BUCKETS } from '../queue/attempt-rows.js';
import { FOLDED, TOTAL } from './stats-rollup.js';

/**
 * The operator reads that summarise history (GET /v1/stats, GET /v1/endpoints), bounded whatever
 * its size: they add up the per-minute counters that the outcome statements keep (delivery_stats,
 * job_counts), folded once a minute is over (stats-rollup.ts: a day of charts is 1,440 rows, a day
 * of an endpoint's health as many), and count live jobs only up to a cap, past which they estimate.
 */

/**
 * Exact counts up to this many; past it, an estimate from the table statistics. A count reads one
 * index entry per job it counts (and, on a day partition not vacuumed yet, its heap row), so this is
 * what `GET /v1/stats` costs at most per status, whatever the history holds. With 10,000 (the cap
 * before) and 100,000 dead jobs kept, the dead count was most of the statement's time.
 */
export const EXACT_UP_TO = 1_000;

export interface QueueCounts {
  pending: number;
  running: number;
  dead: number;
  completed_24h: number;
  cancelled_24h: number;
  /** The counts above that are estimates (past EXACT_UP_TO), if any. */
  estimated?: Array<'pending' | 'dead'>;
}

/**
 * Jobs by status: pending (with the jobs behind their ordering key's head, read on
 * job_queue_behind_idx), running and dead now, completed and cancelled in the last 24 hours.
 * Pending and dead are counted up to EXACT_UP_TO and estimated past it; running jobs are few (each
 * holds a worker). Dead jobs are counted on the index of dead jobs alone (job_history_dead_only_idx,
 * migration 0012), an index-only read. The cap is a literal, so that the plan (generic once the
 * statement has run five times) is made for it.
 *
 * The estimates: pending, job_queue's live rows less the running jobs, as PostgreSQL's cumulative
 * statistics count them (every insert and delete, sent by each connection at most once a second,
 * and within ten seconds of its last commit when it idles; the row estimate of the last analyze
 * lags until autovacuum comes round, and once showed 2,643 pending jobs for 1,400), or that row
 * estimate while the statistics hold nothing for the table (after a crash, or a reset); dead, each
 * day partition of the dead set (which also holds the cancelled jobs) by its row estimate times the
 * share of its rows that are dead in its column statistics (all of them while it has none), as of
 * its last analyze (autovacuum's, every tenth of a partition's rows or so).
 */
export async function queueCounts(db: Queryable): Promise<QueueCounts> {
  const cap = EXACT_UP_TO + 1;
  const res = await db.query<{
    pending: number;
    behind: number;
    running: number;
    dead: number;
    live_est: number;
    dead_est: number;
    completed_24h: number;
    cancelled_24h: number;
  }>({
    name: 'acw_queue_counts',
    text: `select
        (select count(*)::int from (select 1 from job_queue where status = 'pending' limit ${cap}) p) as pending,
        (select count(*)::int from (select 1 from job_queue where status = 'behind' limit ${cap}) b) as behind,
        (select count(*)::int from job_queue where status = 'running') as running,
        (select count(*)::int from (select 1 from job_history_dead where status = 'dead' limit ${cap}) d) as dead,
        (select case when pg_stat_get_tuples_inserted(c.oid) > 0 or pg_stat_get_live_tuples(c.oid) > 0
                     then pg_stat_get_live_tuples(c.oid)::float8 else greatest(c.reltuples, 0)::float8 end
           from pg_class c where c.oid = 'job_queue'::regclass) as live_est,
        (select coalesce(sum(greatest(c.reltuples, 0) * coalesce(
                  (select coalesce(s.most_common_freqs[array_position(s.most_common_vals::text::text[], 'dead')], 0)
                     from pg_stats s where s.schemaname = n.nspname and s.tablename = c.relname and s.attname = 'status'), 1)), 0)::float8
           from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_namespace n on n.oid = c.relnamespace
          where i.inhparent = 'job_history_dead'::regclass and c.reltuples > 0) as dead_est,
        jc.completed_24h, jc.cancelled_24h
      from (select coalesce(sum(completed), 0)::int as completed_24h, coalesce(sum(cancelled), 0)::int as cancelled_24h
              from job_counts where minute > now() - interval '24 hours') jc`,
  });
  const r = res.rows[0]!;
  const estimated: Array<'pending' | 'dead'> = [];
  let pending = r.pending + r.behind;
  let dead = r.dead;
  // Each half is exact unless it reached the cap; either one past it makes the sum an estimate.
  if (r.pending > EXACT_UP_TO || r.behind > EXACT_UP_TO) {
    const atLeast = Math.min(r.pending, EXACT_UP_TO) + Math.min(r.behind, EXACT_UP_TO);
    pending = Math.max(atLeast, Math.round(r.live_est) - r.running);
    estimated.push('pending');
  }
  if (dead > EXACT_UP_TO) {
    dead = Math.max(EXACT_UP_TO, Math.round(r.dead_est));
    estimated.push('dead');
  }
  return {
    pending,
    running: r.running,
    dead,
    completed_24h: r.completed_24h,
    cancelled_24h: r.cancelled_24h,
    ...(estimated.length > 0 ? { estimated } : {}),
  };
}

/**
 * Attempts per time bucket (ok: 2xx; failed: the rest, aborted ones aside) over the last `windowMs`:
 * each minute's TOTAL row (every endpoint's folded counts) plus the slot rows not folded yet. The
 * two halves are apart so that each slot test is a condition on the index, checked before any row
 * is read.
 */
export async function deliveryBuckets(
  db: Queryable,
  windowMs: number,
  bucketS: number,
): Promise<Array<{ at: Date; ok: number; failed: number }>> {
  const res = await db.query<{ at: Date; ok: string; failed: string }>(
    `select date_bin($2 * interval '1 second', minute, timestamptz 'epoch') as at, sum(ok)::text as ok, sum(failed)::text as failed
     from (select minute, ok, failed from delivery_stats where minute > now() - $1 * interval '1 millisecond' and slot = ${TOTAL}
           union all
           select minute, ok, failed from delivery_stats where minute > now() - $1 * interval '1 millisecond' and slot >= 0) c
     group by 1 order by 1`,
    [windowMs, bucketS],
  );
  return res.rows.map((r) => ({ at: r.at, ok: Number(r.ok), failed: Number(r.failed) }));
}

export interface DeliveryHealth {
  attempts: number;
  success_rate: number;
  p50: number | null;
  p99: number | null;
  last_attempt_at: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
}

/**
 * The duration buckets of a group of counter rows added up element-wise, as fixed sums: an array
 * shorter than DURATION_BUCKETS (older counters) adds nothing past its end, and `percentile` reads
 * no further. Where unnesting every row's array and grouping by position made an hour of 20
 * endpoints 21,000 rows to hash (the statement took 9 to 15 ms with 5 million deliveries kept), this
 * is one pass over the rows (under 3 ms).
 */
const BUCKET_SUMS = Array.from({ length: DURATION_BUCKETS }, (_, k) => `coalesce(sum(buckets[${k + 1}]), 0)::int`).join(', ');

/**
 * Each endpoint's attempts over the last `windowMinutes` whole minutes (its FOLDED rows and the
 * slot rows not folded yet): how many, the share
 * answered 2xx, the duration percentiles (from the power-of-two buckets, interpolated within one),
 * the newest attempt and the newest error. Endpoints with no attempt are absent.
 */
export async function deliveryHealth(
  db: Queryable,
  endpoints: readonly string[],
  windowMinutes: number,
): Promise<Map<string, DeliveryHealth>> {
  const res = await db.query<{
    endpoint: string;
    ok: number;
    failed: number;
    buckets: number[];
    last_at: Date;
    last_error: string | null;
    last_error_at: Date | null;
  }>(
    `with w as (
       select * from delivery_stats
       where endpoint = any($1::text[]) and minute >= date_bin('1 minute', now(), timestamptz 'epoch') - ($2 - 1) * interval '1 minute'
         and slot >= ${FOLDED}),
     b as (select endpoint, array[${BUCKET_SUMS}] as buckets from w group by endpoint),
     e as (select distinct on (endpoint) endpoint, last_error, last_error_at from w where last_error_at is not null
           order by endpoint, last_error_at desc)
     select w.endpoint, sum(w.ok)::int as ok, sum(w.failed)::int as failed, max(w.last_at) as last_at,
            coalesce(b.buckets, '{}') as buckets, e.last_error, e.last_error_at
     from w left join b on b.endpoint = w.endpoint left join e on e.endpoint = w.endpoint
     group by w.endpoint, b.buckets, e.last_error, e.last_error_at`,
    [endpoints, windowMinutes],
  );
  const out = new Map<string, DeliveryHealth>();
  for (const r of res.rows) {
    const attempts = r.ok + r.failed;
    if (attempts === 0) continue;
    out.set(r.endpoint, {
      attempts,
      success_rate: r.ok / attempts,
      p50: percentile(r.buckets, 0.5),
      p99: percentile(r.buckets, 0.99),
      last_attempt_at: r.last_at,
      last_error: r.last_error,
      last_error_at: r.last_error_at,
    });
  }
  return out;
}

/**
 * The q-quantile of durations counted in power-of-two buckets (bucket k: from 2^k - 1 up to
 * 2^(k+1) - 1 ms), interpolated linearly within its bucket; null with no count.
 */
export function percentile(buckets: readonly number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let k = 0; k < Math.min(buckets.length, DURATION_BUCKETS); k++) {
    const n = buckets[k] ?? 0;
    if (n === 0) continue;
    if (seen + n >= rank) {
      const lo = 2 ** k - 1;
      const hi = 2 ** (k + 1) - 1;
      return lo + (hi - lo) * Math.min(1, Math.max(0, (rank - seen) / n));
    }
    seen += n;
  }
  return 2 ** DURATION_BUCKETS - 1;
}
