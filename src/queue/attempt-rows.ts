import type { AttemptRecord, LeaseRef } from './types.js';

/**
 * The attempt rows an outcome carries (one HTTP try each), written by the outcome's own statement
 * in transitions.ts: `cte` appends to its CTEs an insert into `job_attempts`, so the row exists
 * exactly when the statement ran, flagged `lease_lost` when the job's lease was gone, and the
 * per-minute counters of `delivery_stats` that the operator reads add up (docs/architecture.md#live-jobs-and-history).
 */

export interface AttemptArrays {
  values: unknown[];
  /**
   * SQL inserting the attempt rows and counting them: `first` is the placeholder number of its one
   * parameter, `written` a relation of `(id uuid, dead boolean)`: the jobs the statement changed
   * under their lease, and whether each went dead (its attempts then keep as long as it does).
   */
  cte: (first: number, written: string) => string;
}

/**
 * Duration buckets of `delivery_stats.buckets`: bucket k counts attempts that took from 2^k - 1 up
 * to 2^(k+1) - 1 ms (bucket 0: under 1 ms), the last one everything longer. Enough for percentiles
 * to about 40% of their value, which is what an endpoint's p50 and p99 need.
 */
export const DURATION_BUCKETS = 18;

/** The bucket of a duration, as the statement below computes it in SQL. */
export function durationBucket(ms: number): number {
  return Math.min(DURATION_BUCKETS - 1, Math.floor(Math.log2(Math.max(0, Math.round(ms)) + 1)));
}

/**
 * The buckets' lower bounds from bucket 1 on (2, 4, ... 2^17): `width_bucket(duration_ms + 1, ...)`
 * is durationBucket in integers. The numeric `log(2.0, ...)` it replaces cost a few percent of
 * PostgreSQL's time per delivery (bench/README.md, "Cost per delivery").
 */
const BUCKET_BOUNDS = `{${Array.from({ length: DURATION_BUCKETS - 1 }, (_, k) => 2 ** (k + 1)).join(',')}}`;

const BUCKET_COUNTS = Array.from({ length: DURATION_BUCKETS }, (_, k) => `count(*) filter (where att.bucket = ${k})::int`).join(', ');

export function attemptArrays(items: ReadonlyArray<{ leased: LeaseRef; attempt?: AttemptRecord | undefined }>): AttemptArrays | null {
  const rows: unknown[] = [];
  for (const i of items) {
    const a = i.attempt;
    if (!a) continue;
    rows.push({
      job_id: i.leased.id,
      lease_token: i.leased.leaseToken,
      attempt: a.attempt,
      endpoint: a.endpoint,
      status_code: a.statusCode,
      error_kind: a.errorKind,
      error: a.error,
      duration_ms: Math.round(a.durationMs),
      response_body: a.responseBody,
      aborted: a.aborted === true,
      probe: a.probe === true,
    });
  }
  if (rows.length === 0) return null;
  // One json parameter built by one JSON.stringify: far cheaper for the worker than ten arrays
  // serialised element by element, and json (not jsonb) is parsed once by the server.
  //
  // A row whose job the statement did not change (its lease was lost) is written unless its
  // (job, lease) already has one: an outcome written again after a failure that hid its commit.
  // Only those rows pay that lookup (`or` stops at the first true), and it is a function
  // (migration 0013) so that the statement's plan holds no partition of job_attempts. Aborted
  // attempts (a shutdown) say nothing about the receiver and are not counted.
  return {
    values: [JSON.stringify(rows)],
    cte: (n, written) => `, att as (
      insert into job_attempts (job_id, lease_token, attempt, endpoint, status_code, error_kind, error, duration_ms, response_body, aborted, probe, lease_lost, dead)
      select a.job_id, a.lease_token, a.attempt, a.endpoint, a.status_code, a.error_kind, a.error, a.duration_ms, a.response_body, a.aborted, a.probe,
        w.id is null, coalesce(w.dead, false)
      from json_to_recordset($${n}::json)
        as a(job_id uuid, lease_token uuid, attempt int, endpoint text, status_code int, error_kind text, error text, duration_ms int,
             response_body text, aborted boolean, probe boolean)
      left join ${written} w on w.id = a.job_id
      where w.id is not null or not acw_attempt_written(a.job_id, a.lease_token)
      returning endpoint, status_code, error_kind, error, aborted, width_bucket(duration_ms + 1, '${BUCKET_BOUNDS}'::int[]) as bucket),
    counted as (
      insert into delivery_stats as s (minute, endpoint, slot, ok, failed, permanent, buckets, last_at, last_error, last_error_at)
      select date_bin('1 minute', now(), timestamptz 'epoch'), coalesce(att.endpoint, ''), pg_backend_pid() % 64,
        count(*) filter (where att.status_code between 200 and 299),
        count(*) filter (where att.status_code is null or att.status_code not between 200 and 299),
        count(*) filter (where att.status_code between 400 and 499 and att.status_code not in (408, 425, 429)),
        array[${BUCKET_COUNTS}], now(),
        (array_agg(coalesce(att.error, att.error_kind)) filter (where att.error_kind is not null))[1],
        case when bool_or(att.error_kind is not null) then now() end
      from att
      where not att.aborted
      group by 2
      -- Rows locked in one order: two statements of the same slot never wait on each other crosswise.
      order by 2
      on conflict (minute, endpoint, slot) do update set
        ok = s.ok + excluded.ok, failed = s.failed + excluded.failed, permanent = s.permanent + excluded.permanent,
        buckets = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(s.buckets, excluded.buckets) u(x, y)),
        last_at = excluded.last_at,
        last_error = coalesce(excluded.last_error, s.last_error), last_error_at = coalesce(excluded.last_error_at, s.last_error_at))`,
  };
}
