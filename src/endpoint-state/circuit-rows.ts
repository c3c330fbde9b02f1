import type pg from 'pg';
import { withTransaction, type Queryable } from '../db/pool.js';
import type { CircuitConfig, CircuitState } from './types.js';

/**
 * The circuit breaker's statements on `endpoint_state` (docs/operations.md#circuit-breaker); its
 * alerts' are in alerts.ts. FLUSH_SQL is where a circuit opens and closes; endpoint-states.ts decides
 * when each runs. Times come from the database clock; rows are locked in name order wherever
 * several are, so two processes never deadlock on them.
 */

/** Outcomes of one endpoint since the last flush. */
export interface Delta {
  ok: number;
  bad: number;
  /** Failures after the last success in this delta (all of them when there was none). */
  trailing: number;
  err: string | null;
  probeJob: string | null;
  probeOk: boolean | null;
  /** Attempts answered with a permanent failure (4xx other than 408, 425, 429), and their distinct statuses. */
  permanent: number;
  codes: number[];
}

export interface StateRow {
  endpoint: string;
  circuit: CircuitState;
  paused: boolean;
  next_probe_ms: number | null;
  probe_deadline_ms: number | null;
  opened_ms: number | null;
  since_ms: number;
  open_alert_id: string | null;
  failing: boolean;
  failing_alert_id: string | null;
  db_now_ms: number;
}

export interface FlushRow {
  endpoint: string;
  old_circuit: CircuitState;
  circuit: CircuitState;
  consecutive_failures: number;
  cooldown_ms: number | null;
  last_error: string | null;
  failing: boolean;
  old_failing: boolean;
}

const STATE_COLUMNS = `endpoint, circuit, paused,
  extract(epoch from next_probe_at)::float8 * 1000 as next_probe_ms,
  extract(epoch from probe_deadline)::float8 * 1000 as probe_deadline_ms,
  extract(epoch from coalesce(alert_opened_at, opened_at))::float8 * 1000 as opened_ms, extract(epoch from circuit_since)::float8 * 1000 as since_ms,
  open_alert_id, failing, failing_alert_id,
  extract(epoch from now())::float8 * 1000 as db_now_ms`;

/**
 * One flush: every endpoint's outcomes since the last one, in one statement, rows locked in name
 * order. The failure-rate window starts at a failure, so a closed endpoint that only succeeds is
 * never written; a row is written only when a value changes. It opens a closed circuit at the
 * failure threshold or rate; settles a half-open one on its probe's outcome (success: closed and
 * reset; failure: open again with the cool-down doubled up to its maximum). It also judges whether
 * the endpoint fails (docs/operations.md#failing-endpoints): a run of attempts that starts at a
 * permanent failure is judged once it holds circuit.min_attempts, however long that took, failing
 * when at least half failed permanently; while failing, every run is judged, and one with fewer
 * ends it.
 */
const FLUSH_SQL = `with d as (
    select d.ep, d.ok, d.bad, d.tail, d.err, d.probe_job, d.probe_ok, d.perm, string_to_array(d.codes, ',')::int[] as codes
    from unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::text[], $6::uuid[], $7::boolean[], $16::int[], $17::text[])
      as d(ep, ok, bad, tail, err, probe_job, probe_ok, perm, codes)),
  cur as (select s.* from endpoint_state s where s.endpoint in (select ep from d) order by s.endpoint for update),
  w as (
    select c.*, d.ok, d.bad, d.err, d.probe_ok, d.perm, d.codes,
      (c.circuit = 'half_open' and d.probe_job is not null and d.probe_job = c.probe_job_id and d.probe_ok is not null) as probed,
      case when d.ok > 0 then d.tail else c.consecutive_failures + d.bad end as cf,
      (c.window_started_at is not null and c.window_started_at > now() - $11::float8 * interval '1 millisecond') as in_window,
      (c.failing or c.fail_run_attempts > 0 or d.perm > 0) as in_run
    from cur c join d on d.ep = c.endpoint),
  r as (
    select w.*,
      case when w.in_run then w.fail_run_attempts + w.ok + w.bad else 0 end as ra,
      case when w.in_run then w.fail_run_permanent + w.perm else 0 end as rp,
      case when w.in_run then array(select distinct x from unnest(w.fail_run_codes || w.codes) x order by x) else '{}'::int[] end as rc
    from w),
  f as (
    select r.*, r.ra >= $10::int as judged,
      case when r.ra >= $10::int then r.rp * 2 >= r.ra else r.failing end as nfail
    from r),
  x as (
    select w.*,
      case when w.in_window then w.window_started_at when w.bad > 0 then now() end as ws,
      case when w.in_window then w.window_attempts + w.ok + w.bad when w.bad > 0 then w.ok + w.bad else 0 end as wa,
      case when w.in_window then w.window_failures + w.bad when w.bad > 0 then w.bad else 0 end as wf
    from f w),
  n as (
    select x.*,
      case
        when x.probed and x.probe_ok then 'closed'
        when x.probed then 'open'
        when x.circuit = 'closed' and $15::boolean and (x.cf >= $8::int or (x.wa >= $10::int and x.wf >= $9::float8 * x.wa)) then 'open'
        else x.circuit end as nc
    from x),
  v as (
    select n.endpoint, n.circuit as old_circuit, n.nc,
      case when n.nc = 'closed' and n.circuit <> 'closed' then 0 else n.cf end as cf,
      case when n.nc = 'closed' and n.circuit <> 'closed' then null else n.ws end as ws,
      case when n.nc = 'closed' and n.circuit <> 'closed' then 0 else n.wa end as wa,
      case when n.nc = 'closed' and n.circuit <> 'closed' then 0 else n.wf end as wf,
      case when n.nc = n.circuit then n.cooldown_ms
           when n.nc = 'open' and n.circuit = 'closed' then $12::int
           when n.nc = 'open' then least(coalesce(n.cooldown_ms, $12::int)::bigint * 2, $13::int)::int end as cd,
      coalesce(n.err, n.last_error) as le,
      case when n.err is not null then now() else n.last_error_at end as lea,
      n.failing as old_failing, n.nfail,
      (n.alert_opened_at is not null and n.circuit_since > now() - $18::float8 * interval '1 millisecond') as goes_on,
      case when n.judged then 0 else n.ra end as ra,
      case when n.judged then 0 else n.rp end as rp,
      case when n.judged then '{}'::int[] else n.rc end as rc,
      case when n.judged and n.nfail then n.rc else n.failing_codes end as fcodes
    from n),
  upd as (
    update endpoint_state s set
      circuit = v.nc,
      circuit_since = case when v.nc <> v.old_circuit then now() else s.circuit_since end,
      opened_at = case when v.nc = 'closed' then null when v.old_circuit = 'closed' then now() else s.opened_at end,
      next_probe_at = case when v.nc = 'open' and v.nc <> v.old_circuit then now() + v.cd * interval '1 millisecond'
                           when v.nc = 'closed' then null else s.next_probe_at end,
      cooldown_ms = v.cd,
      probe_job_id = case when v.nc = 'half_open' then s.probe_job_id end,
      probe_deadline = case when v.nc = 'half_open' then s.probe_deadline end,
      consecutive_failures = v.cf, window_started_at = v.ws, window_attempts = v.wa, window_failures = v.wf,
      last_error = v.le, last_error_at = v.lea,
      -- An outage for its alert: one that opens again within resolve_after of closing goes on (a flap),
      -- with its start, its flaps, and the deliveries held at each close.
      alert_opened_at = case when v.nc = 'open' and v.old_circuit = 'closed'
                             then case when v.goes_on then s.alert_opened_at else now() end else s.alert_opened_at end,
      alert_flaps = case when v.nc = 'open' and v.old_circuit = 'closed'
                         then case when v.goes_on then s.alert_flaps + 1 else 0 end else s.alert_flaps end,
      alert_held = case when v.nc = 'open' and v.old_circuit = 'closed' and not v.goes_on then 0
                        when v.nc = 'closed' and v.old_circuit <> 'closed'
                        then s.alert_held + least(100000, (select count(*)::int from (select 1 from job_queue j
                               where j.status = 'pending' and j.endpoint = s.endpoint and j.run_at <= now() limit 100000) h)
                          -- and the jobs behind their ordering key's head (job_queue_behind_idx): they waited too.
                          + (select count(*)::int from (select 1 from job_queue j
                               where j.status = 'behind' and j.endpoint = s.endpoint limit 100000) b))
                        else s.alert_held end,
      fail_run_attempts = v.ra, fail_run_permanent = v.rp, fail_run_codes = v.rc, failing = v.nfail, failing_codes = v.fcodes,
      failing_since = case when v.nfail and not v.old_failing then now() when v.nfail then s.failing_since end,
      failing_dead = case when v.nfail and not v.old_failing then 0 else s.failing_dead end,
      updated_at = now()
    from v
    where s.endpoint = v.endpoint
      and (v.nc, v.cf, v.ws, v.wa, v.wf, v.cd, v.le, v.lea, v.ra, v.rp, v.rc, v.nfail) is distinct from
          (s.circuit, s.consecutive_failures, s.window_started_at, s.window_attempts, s.window_failures, s.cooldown_ms, s.last_error,
           s.last_error_at, s.fail_run_attempts, s.fail_run_permanent, s.fail_run_codes, s.failing)
    returning s.endpoint, v.old_circuit, s.circuit, s.consecutive_failures, s.cooldown_ms, s.last_error, s.failing, v.old_failing)
  select upd.*, case when upd.circuit <> upd.old_circuit or upd.failing <> upd.old_failing then pg_notify($14::text, upd.endpoint) end is null as _n
  from upd`;

/** Durations as int4 milliseconds, as the state row stores them. */
const ms = (v: number): number => Math.min(v, 2 ** 31 - 1);

/** Every endpoint delivered to gets its row (a rate limit's bucket lives there). */
export async function ensureStateRows(db: Queryable, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  await db.query(`insert into endpoint_state (endpoint) select unnest($1::text[]) order by 1 on conflict (endpoint) do nothing`, [
    [...names].toSorted(),
  ]);
}

/** The rows that hold jobs, fail, or owe an alert. */
export async function readHoldingStates(db: Queryable): Promise<StateRow[]> {
  const res = await db.query<StateRow>(
    `select ${STATE_COLUMNS} from endpoint_state
     where circuit <> 'closed' or paused or open_alert_id is not null or failing or failing_alert_id is not null`,
  );
  return res.rows;
}

/**
 * One flush (FLUSH_SQL): the rows whose values changed, with their circuit before and after. It
 * runs on its generic plan: given arrays, PostgreSQL planned each execution anew (a custom plan
 * sized to the arrays always looked cheaper than the generic one), about 7 ms of planning for
 * 0.2 ms of work, at every flush of every process (bench/README.md#planning).
 */
export async function writeOutcomes(
  pool: pg.Pool,
  batch: ReadonlyArray<readonly [string, Delta]>,
  c: CircuitConfig,
  channel: string,
): Promise<FlushRow[]> {
  return withTransaction(pool, (db) => flushOutcomes(db, batch, c, channel), { genericPlans: true });
}

async function flushOutcomes(
  db: Queryable,
  batch: ReadonlyArray<readonly [string, Delta]>,
  c: CircuitConfig,
  channel: string,
): Promise<FlushRow[]> {
  const res = await db.query<FlushRow>({
    name: 'acw_endpoint_flush',
    text: FLUSH_SQL,
    values: [
      batch.map(([ep]) => ep),
      batch.map(([, d]) => d.ok),
      batch.map(([, d]) => d.bad),
      batch.map(([, d]) => d.trailing),
      batch.map(([, d]) => d.err),
      batch.map(([, d]) => d.probeJob),
      batch.map(([, d]) => d.probeOk),
      c.failure_threshold,
      c.failure_rate,
      c.min_attempts,
      c.window,
      ms(c.cooldown),
      ms(c.cooldown_max),
      channel,
      c.enabled,
      batch.map(([, d]) => d.permanent),
      batch.map(([, d]) => d.codes.join(',')),
      c.resolve_after,
    ],
  });
  return res.rows;
}

/** With the breaker off: close every circuit left open or half-open. Returns the endpoints closed. */
export async function closeAllCircuits(db: Queryable, channel: string): Promise<string[]> {
  const res = await db.query<{ endpoint: string }>(
    `with c as (select endpoint from endpoint_state where circuit <> 'closed' order by endpoint for update)
     update endpoint_state s set circuit = 'closed', circuit_since = now(), opened_at = null, next_probe_at = null,
       cooldown_ms = null, probe_job_id = null, probe_deadline = null, consecutive_failures = 0,
       window_started_at = null, window_attempts = 0, window_failures = 0, updated_at = now()
     from c where s.endpoint = c.endpoint
     returning s.endpoint, pg_notify($1, s.endpoint) is null as _n`,
    [channel],
  );
  return res.rows.map((r) => r.endpoint);
}

/** Probes cut short by a stop: their circuits are due for a probe at once (not at the deadline, doubled). */
export async function reopenCutProbes(db: Queryable, probeJobIds: readonly string[]): Promise<void> {
  if (probeJobIds.length === 0) return;
  await db.query(
    `update endpoint_state set circuit = 'open', next_probe_at = now(), probe_job_id = null, probe_deadline = null, updated_at = now()
     where circuit = 'half_open' and probe_job_id = any($1::uuid[])`,
    [probeJobIds],
  );
}

/** Half-open circuits whose probe outlived its deadline: open again, cool-down doubled. */
export async function reopenLateProbes(
  db: Queryable,
  names: readonly string[],
  c: CircuitConfig,
  channel: string,
): Promise<Array<{ endpoint: string; cooldown_ms: number }>> {
  if (names.length === 0) return [];
  const res = await db.query<{ endpoint: string; cooldown_ms: number }>(
    `with late as (
       select endpoint from endpoint_state where endpoint = any($1::text[]) and circuit = 'half_open' and probe_deadline <= now()
       order by endpoint for update skip locked)
     update endpoint_state s set circuit = 'open', circuit_since = now(),
       cooldown_ms = least(coalesce(s.cooldown_ms, $2::int)::bigint * 2, $3::int)::int,
       next_probe_at = now() + least(coalesce(s.cooldown_ms, $2::int)::bigint * 2, $3::int) * interval '1 millisecond',
       probe_job_id = null, probe_deadline = null, updated_at = now()
     from late where s.endpoint = late.endpoint
     returning s.endpoint, s.cooldown_ms, pg_notify($4, s.endpoint) is null as _n`,
    [[...names].toSorted(), ms(c.cooldown), ms(c.cooldown_max), channel],
  );
  return res.rows;
}
