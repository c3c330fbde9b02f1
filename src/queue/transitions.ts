import type pg from 'pg';
import { withTransaction, type Queryable } from '../db/pool.js';
import { attemptArrays } from './attempt-rows.js';
import { ATTEMPTS_SPENT, CLEAR_LEASE, JOB_COLUMNS, NOT_SKIPPED, RETURNING, SET_RUNNING, redriveWhere } from './job-rows.js';
import { dbToLocal, toClaimed, toDead, toHeldJob, type ClaimRow, type InsertRow, type TransitionRow } from './job-rows.js';
import type { JobRow, ReapedRow, RedriveMatch } from './job-rows.js';
import type { AttemptRecord, ClaimedJob, DeadHook, Held, NewJob } from './types.js';
import type { ClaimOptions, FailItem, FailResult, HoldOptions, InsertedJobs, ReleaseItem } from './transition-types.js';
import type { ExpiredRow, ExpiryCursor } from './transition-types.js';

export type { ClaimOptions, ExpiredRow, ExpiryCursor, FailItem, FailResult, HoldOptions, InsertedJobs, ReleaseItem };

/**
 * Every change to a job's status, one exported function per transition of the state machine in
 * docs/operations.md#job-states. This is the only module that writes `jobs` (the purge runner's
 * delete of old finished jobs aside; test/queue/transitions-home.test.ts holds that), so that a
 * rule such as "attempts spent -> dead" or "a real attempt clears the skip columns" is written
 * once, and a new column or transition is one change here (the probe claim, expiry, an endpoint's
 * force-delete and replay live here too).
 *
 * After the claim, every write is guarded by id + lease_token + status 'running', so a worker that
 * lost its lease changes nothing; the attempt rows (attempt-rows.ts) go in the outcome's statement.
 * Batches go through arrays (`unnest`); the fragments the statements share are in job-rows.ts.
 * The hot-path statements are prepared (`name`) and were tuned (bench/README.md): change their
 * text only with a measurement.
 */

/**
 * Any due job of the given types, oldest first, from the `(run_at, id)` index of pending jobs.
 * The update finds the chosen rows through `= any(array(...))` so that even a generic plan of the
 * prepared statement reaches them by primary key instead of joining against a scan of `jobs`.
 */
const CLAIM_SQL = `with due as (
    select id from jobs
    where status = 'pending' and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
    order by run_at, id limit $3 for update skip locked)
  update jobs j set ${SET_RUNNING} where j.id = any(array(select id from due)) returning ${RETURNING}`;

/**
 * Per-endpoint slots, fair: each endpoint with free slots is read from its own range of the
 * `(endpoint, run_at, id)` index, at most its free slots, so a capped endpoint's backlog is never
 * walked; candidates are then taken round-robin (every endpoint's oldest first, then every
 * endpoint's second...), so a stuck endpoint's old backlog cannot go ahead of a healthy endpoint's
 * new jobs. Deliveries are bounded by $3, jobs without an endpoint (from their own partial index)
 * by $7, both together by $8. Candidates not chosen are unlocked when the statement ends.
 *
 * Endpoint state (docs/operations.md#circuit-breaker) is read here, so every process obeys it: an
 * endpoint whose circuit is not closed, or that is paused, offers no slot, and its jobs simply stay
 * pending. An endpoint with a rate limit ($9, deliveries per second; 0: none) offers at most the
 * whole tokens in its bucket (refilled at the rate, holding at most one second's worth, at least 1)
 * and the tokens its claimed jobs take are spent in the same statement. Its bucket row is locked
 * SKIP LOCKED: while another process claims for that endpoint, this claim leaves it out.
 */
const CLAIM_FAIR_SQL = `with req as (select ep, n, rate from unnest($5::text[], $6::int[], $9::float8[]) s(ep, n, rate) where n > 0),
  bucket as (
    select st.endpoint, least(greatest(r.rate, 1),
      coalesce(st.tokens + r.rate * extract(epoch from now() - st.tokens_at), greatest(r.rate, 1))) as tokens
    from endpoint_state st join req r on r.ep = st.endpoint and r.rate > 0
    order by st.endpoint for update of st skip locked),
  eps as (
    select r.ep, case when r.rate > 0 then least(r.n, floor(b.tokens)::int) else r.n end as n from req r left join bucket b on b.endpoint = r.ep
    where (r.rate = 0 or b.endpoint is not null)
      and not exists (select 1 from endpoint_state st where st.endpoint = r.ep and (st.circuit <> 'closed' or st.paused))),
  by_endpoint as (
    select d.id, d.run_at, row_number() over (partition by eps.ep order by d.run_at, d.id) as rn from eps cross join lateral (
      select id, run_at from jobs
      where status = 'pending' and endpoint = eps.ep and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit least(eps.n, $3) for update skip locked) d where eps.n > 0),
  fair as (select id, run_at, rn from by_endpoint order by rn, run_at, id limit $3),
  unkeyed as (
    select u.id, u.run_at, row_number() over (order by u.run_at, u.id) as rn from (
      select id, run_at from jobs
      where $7::int > 0 and status = 'pending' and endpoint is null and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit $7 for update skip locked) u),
  chosen as (select id from (select * from fair union all select * from unkeyed) c order by rn, run_at, id limit $8),
  upd as (update jobs j set ${SET_RUNNING} where j.id = any(array(select id from chosen)) returning ${RETURNING}),
  spend as (
    update endpoint_state st set tokens = b.tokens - u.k, tokens_at = now(), updated_at = now()
    from bucket b join (select endpoint, count(*) as k from upd group by endpoint) u on u.endpoint = b.endpoint
    where st.endpoint = b.endpoint)
  select * from upd`;

/** Claim: pending -> running, one attempt spent, a fresh lease on the database clock. */
export async function claimJobs(db: Queryable, opts: ClaimOptions): Promise<ClaimedJob[]> {
  const plan = opts.plan;
  const slots = plan?.endpoints;
  const res =
    plan && slots
      ? await db.query<ClaimRow>({
          name: 'acw_claim_fair',
          text: CLAIM_FAIR_SQL,
          values: [
            opts.workerId,
            opts.leaseMs,
            plan.deliveries,
            opts.types ?? null,
            [...slots.keys()],
            [...slots.values()],
            plan.workers,
            plan.total,
            [...slots.keys()].map((ep) => plan.rates?.get(ep) ?? 0),
          ],
        })
      : await db.query<ClaimRow>({
          name: 'acw_claim',
          text: CLAIM_SQL,
          values: [opts.workerId, opts.leaseMs, plan ? plan.total : (opts.limit ?? 1), opts.types ?? null],
        });
  const localNow = Date.now();
  return res.rows.map((r) => toClaimed(r, localNow));
}

/**
 * Probe claim (docs/operations.md#circuit-breaker): for each endpoint whose circuit is open and due
 * for a probe, take its oldest due job (pending -> running, as a claim) and set the circuit to
 * half-open with that job as its probe and a deadline (`deadlineMs` from now, on the database
 * clock). The state row is locked SKIP LOCKED, so of processes probing at once one wins; an
 * endpoint with no due job stays open, to be probed by the next job that falls due.
 */
export async function claimProbes(
  db: Queryable,
  opts: {
    workerId: string;
    leaseMs: number;
    type: string;
    endpoints: ReadonlyArray<{ name: string; deadlineMs: number }>;
    channel: string;
  },
): Promise<ClaimedJob[]> {
  if (opts.endpoints.length === 0) return [];
  const res = await db.query<ClaimRow>({
    name: 'acw_claim_probe',
    text: `with due as (
        select s.endpoint, t.deadline_ms from endpoint_state s join unnest($3::text[], $4::int[]) t(ep, deadline_ms) on t.ep = s.endpoint
        where s.circuit = 'open' and not s.paused and s.next_probe_at <= now()
          -- Only an endpoint with a due job is locked: an open one with nothing to send costs no lock.
          and exists (select 1 from jobs where status = 'pending' and endpoint = s.endpoint and run_at <= now() and type = $5)
        order by s.endpoint for update of s skip locked),
      pick as (
        select p.id, due.endpoint, due.deadline_ms from due cross join lateral (
          select id from jobs where status = 'pending' and endpoint = due.endpoint and run_at <= now() and type = $5
          order by run_at, id limit 1 for update skip locked) p),
      upd as (update jobs j set ${SET_RUNNING} from pick where j.id = pick.id returning ${RETURNING}),
      st as (
        update endpoint_state s set circuit = 'half_open', circuit_since = now(), probe_job_id = pick.id,
          probe_deadline = now() + pick.deadline_ms * interval '1 millisecond', updated_at = now()
        from pick where s.endpoint = pick.endpoint returning s.endpoint)
      select upd.*, (select pg_notify($6, string_agg(endpoint, ',')) from st) is null as _n from upd`,
    values: [
      opts.workerId,
      opts.leaseMs,
      opts.endpoints.map((e) => e.name),
      opts.endpoints.map((e) => Math.round(e.deadlineMs)),
      opts.type,
      opts.channel,
    ],
  });
  const localNow = Date.now();
  return res.rows.map((r) => toClaimed(r, localNow));
}

/**
 * Insert many jobs in one statement, with one constant-payload NOTIFY for the lot (delivered at
 * commit). Delayed jobs notify too, so idle workers learn when to set their timer.
 */
export async function enqueueJobs(db: Queryable, jobs: readonly NewJob[], channel: string): Promise<string[]> {
  return (await insertJobs(db, jobs, channel)).ids;
}

/**
 * Insert: -> pending, or -> running for the jobs named in `hold` (insert as running: claim on
 * dispatch), with a fresh lease for `hold.workerId` (one attempt spent, as a claim would): the
 * caller hands them to its worker pool after commit, which saves a claim and a NOTIFY hop per job. Should the process die first, the
 * reaper hands them back when the lease runs out, as after any claim. The NOTIFY goes out only
 * when a job is pending. Leases run from the insert itself (clock_timestamp), not from the start
 * of a transaction that may have run for a while.
 *
 * With `skipExisting`, a job whose id exists already is left as it is and not returned (a webhook
 * job's id is fixed by its event and endpoint, and an event dispatched again must not fail its
 * batch). Without it such a job fails the statement (unique violation on jobs_pkey, see
 * isExistingJob): the check costs a speculative insertion per row, so the hot path goes without it
 * and retries with it.
 */
export async function insertJobs(
  db: Queryable,
  jobs: readonly NewJob[],
  channel: string,
  hold?: HoldOptions,
  opts: { skipExisting?: boolean } = {},
): Promise<InsertedJobs> {
  if (jobs.length === 0) return { ids: [], held: [] };
  // One json parameter built by one JSON.stringify, as for attempt rows (attempt-rows.ts): nine
  // arrays cost pg an escape per element (the payload's body escaped twice), 6% of a batch
  // notify's CPU. A JSON null is an SQL null there, hence the coalesce (the payload column is not null).
  let pending = false;
  const rows = jobs.map((j) => {
    const held = hold !== undefined && j.id !== undefined && !j.delayMs && hold.ids.has(j.id);
    if (!held) pending = true;
    return {
      id: j.id ?? null,
      type: j.type,
      payload: j.payload ?? null,
      max_attempts: j.maxAttempts,
      delay: Math.max(0, Math.round(j.delayMs ?? 0)),
      event_id: j.eventId ?? null,
      endpoint: j.endpoint ?? null,
      held,
    };
  });
  if (hold === undefined && !opts.skipExisting && jobs.every((j) => j.id !== undefined)) {
    // Every id known, none held, none skipped: either all go in or the statement fails, so nothing
    // needs to come back. Not returning a row per job spared PostgreSQL ~10% of a batch notify's
    // job insert (bench/README.md#http-entry-point).
    await db.query({
      name: 'acw_enqueue_known',
      text: `with ins as (
        insert into jobs (id, type, payload, max_attempts, run_at, event_id, endpoint)
        select t.id, t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts, now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint
        from json_to_recordset($1::json) as t(id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text))
      select pg_notify($2, '')`,
      values: [JSON.stringify(rows), channel],
    });
    return { ids: jobs.map((j) => j.id!), held: [] };
  }
  const res = await db.query<InsertRow>({
    name: opts.skipExisting ? 'acw_enqueue_skip' : 'acw_enqueue',
    text: `with ins as (
      insert into jobs (id, type, payload, max_attempts, run_at, event_id, endpoint, status, attempts, locked_by, lease_token, lease_expires_at)
      select coalesce(t.id, gen_random_uuid()), t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts,
        now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint,
        case when t.held then 'running' else 'pending' end, case when t.held then 1 else 0 end,
        case when t.held then $3 end, case when t.held then gen_random_uuid() end,
        case when t.held then clock_timestamp() + $4 * interval '1 millisecond' end
      from json_to_recordset($1::json)
        as t(id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text, held boolean)
      ${opts.skipExisting ? 'on conflict (id) do nothing' : ''}
      returning id, lease_token, extract(epoch from lease_expires_at)::float8 * 1000 as lease_expires_ms)
    select ins.*, extract(epoch from clock_timestamp())::float8 * 1000 as db_now_ms
    from ins, (select case when bool_or(p) then pg_notify($2, '') end from unnest(array[$5::boolean]) p) n`,
    values: [JSON.stringify(rows), channel, hold?.workerId ?? null, hold?.leaseMs ?? 0, pending],
  });
  const ids = res.rows.map((r) => r.id);
  const held: ClaimedJob[] = [];
  if (hold) {
    const localNow = Date.now();
    const byId = new Map(jobs.map((j) => [j.id, j]));
    for (const r of res.rows) {
      if (r.lease_token === null || r.lease_expires_ms === null) continue;
      const j = byId.get(r.id);
      if (!j) continue;
      held.push(toHeldJob(j, { ...r, lease_token: r.lease_token, lease_expires_ms: r.lease_expires_ms }, localNow));
    }
  }
  return { ids, held };
}

/** An event's statement and its jobs, written as one (insertWithJobs). */
export interface WithJobs {
  /**
   * The statement that writes the event, with its parameters ($1..$n): the first part of this one.
   * It returns a row when it wrote the event; when it returns none (an `on conflict do nothing`
   * that met a taken key), no job goes in and nothing is notified.
   */
  first: { text: string; values: unknown[] };
  /** Due now, none held: the jobs' ids and endpoints, one each. */
  ids: readonly string[];
  endpoints: readonly string[];
  type: string;
  maxAttempts: number;
  eventId: string;
  /**
   * Their payload, `{topic, body}`, the body made in SQL: `bodyBefore`, then the constant SQL
   * expression `bodyNowSql` (of the statement's now()), then `bodyAfter`.
   */
  topic: string;
  bodyBefore: string;
  bodyNowSql: string;
  bodyAfter: string;
  /** Its prepared statement's name: one per `first.text` and `bodyNowSql`. */
  name: string;
}

/**
 * One statement for a notify of one event in autocommit (src/notify/notify.ts): the event goes in
 * with its jobs, pending, and the NOTIFY is sent, atomically, in one round trip instead of the
 * four (begin, two inserts, commit) of a transaction. The body is finished in SQL because only
 * the statement knows its now(), which is the event's created_at. Answers whether `first` wrote
 * the event (and so the jobs went in).
 */
export async function insertWithJobs(db: Queryable, w: WithJobs, channel: string): Promise<boolean> {
  const n = w.first.values.length;
  const p = (k: number): string => `$${n + k}`;
  const res = await db.query<{ written: boolean }>({
    name: w.name,
    text: `with first as (${w.first.text}), ins as (
      insert into jobs (id, type, payload, max_attempts, run_at, event_id, endpoint)
      select j.id, ${p(1)}, jsonb_build_object('topic', ${p(2)}::text, 'body', ${p(3)}::text || ${w.bodyNowSql} || ${p(4)}::text),
        ${p(5)}, now(), ${p(6)}, j.endpoint
      from unnest(${p(7)}::uuid[], ${p(8)}::text[]) as j(id, endpoint)
      where exists (select 1 from first))
    select w.written, case when w.written and cardinality(${p(7)}::uuid[]) > 0 then pg_notify(${p(9)}, '') end
    from (select exists (select 1 from first) as written) w`,
    values: [...w.first.values, w.type, w.topic, w.bodyBefore, w.bodyAfter, w.maxAttempts, w.eventId, w.ids, w.endpoints, channel],
  });
  return res.rows[0]?.written === true;
}

/** The error of a job insert (without `skipExisting`) that met an existing job id. */
export function isExistingJob(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === '23505' && e.constraint === 'jobs_pkey';
}

/** Renew the leases of every job held; returns the new expiry (on this process's clock) of those still held. */
export async function renewLeases(db: Queryable, held: readonly Held[], leaseMs: number): Promise<Map<string, number>> {
  if (held.length === 0) return new Map();
  const res = await db.query<{ id: string; lease_expires_at: Date; db_now: Date }>({
    name: 'acw_renew',
    text: `update jobs j set lease_expires_at = now() + $3 * interval '1 millisecond'
      from unnest($1::uuid[], $2::uuid[]) t(id, lease_token)
      where j.id = t.id and j.lease_token = t.lease_token and j.status = 'running'
      returning j.id, j.lease_expires_at, now() as db_now`,
    values: [held.map((h) => h.id), held.map((h) => h.leaseToken), leaseMs],
  });
  const localNow = Date.now();
  return new Map(res.rows.map((r) => [r.id, dbToLocal(r.lease_expires_at.getTime(), r.db_now.getTime(), localNow)]));
}

/** Complete: running -> completed. Returns the ids whose lease still held (the rest changed nothing). */
export async function completeJobs(
  db: Queryable,
  items: ReadonlyArray<{ held: Held; attempt?: AttemptRecord | undefined }>,
): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const att = attemptArrays(items);
  const res = await db.query<{ id: string }>({
    name: att ? 'acw_complete_att' : 'acw_complete',
    text: `with upd as (
        update jobs j set status = 'completed', completed_at = now(), last_error = null, ${NOT_SKIPPED}, ${CLEAR_LEASE}
        from unnest($1::uuid[], $2::uuid[]) t(id, lease_token)
        where j.id = t.id and j.lease_token = t.lease_token and j.status = 'running'
        returning j.id)${att ? att.cte(3) : ''}
      select id from upd`,
    values: [items.map((i) => i.held.id), items.map((i) => i.held.leaseToken), ...(att?.values ?? [])],
  });
  return new Set(res.rows.map((r) => r.id));
}

/**
 * Fail: running -> pending after the delay (retry after back-off), or -> dead when the attempts
 * are spent or the failure is permanent. The dead hook runs in the same transaction, with only the
 * rows this one changed.
 */
export async function failJobs(pool: pg.Pool, items: readonly FailItem[], onDead?: DeadHook): Promise<FailResult> {
  if (items.length === 0) return { changed: new Map() };
  const att = attemptArrays(items);
  const text = `with upd as (
      update jobs j set
        status = case when t.dead or ${ATTEMPTS_SPENT} then 'dead' else 'pending' end,
        run_at = case when t.dead or ${ATTEMPTS_SPENT} then j.run_at
                      else now() + t.delay * interval '1 millisecond' end,
        last_error = t.error, ${NOT_SKIPPED}, ${CLEAR_LEASE}
      from unnest($1::uuid[], $2::uuid[], $3::text[], $4::boolean[], $5::int[]) t(id, lease_token, error, dead, delay)
      where j.id = t.id and j.lease_token = t.lease_token and j.status = 'running'
      returning j.id, j.status, j.type, j.payload, j.attempts, j.max_attempts, j.last_error, j.event_id, j.endpoint, j.run_at)${
        att ? att.cte(6) : ''
      }
    select * from upd`;
  const values = [
    items.map((i) => i.held.id),
    items.map((i) => i.held.leaseToken),
    items.map((i) => i.error),
    items.map((i) => i.dead),
    items.map((i) => Math.max(0, Math.round(i.delayMs))),
    ...(att?.values ?? []),
  ];
  // A job sent to dead on purpose keeps its reason; one that ran out of attempts says so.
  const reasons = new Map(items.map((i) => [i.held.id, i.dead ? i.reason : ('max_attempts' as const)]));
  return withTransaction(pool, async (client) => {
    const res = await client.query<TransitionRow & { run_at: Date }>({ name: att ? 'acw_fail_att' : 'acw_fail', text, values });
    const dead = res.rows.filter((r) => r.status === 'dead');
    if (dead.length > 0 && onDead)
      await onDead(
        client,
        dead.map((r) => toDead(r, reasons.get(r.id) ?? 'max_attempts')),
      );
    return {
      changed: new Map(res.rows.map((r) => [r.id, { status: r.status as 'pending' | 'dead', runAt: r.run_at }])),
    };
  });
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
        update jobs j set status = 'pending', attempts = greatest(j.attempts - 1, 0),
          run_at = now() + t.delay * interval '1 millisecond', last_error = coalesce(t.error, j.last_error),
          parked_since = case t.park when 'unknown' then coalesce(j.parked_since, now()) when 'disabled' then null else j.parked_since end,
          skipped_since = case when t.park is null then j.skipped_since else coalesce(j.skipped_since, now()) end, ${CLEAR_LEASE}
        from unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::text[]) t(id, lease_token, delay, error, park)
        where j.id = t.id and j.lease_token = t.lease_token and j.status = 'running'
        returning j.id)${att ? att.cte(6) : ''}
      select id from upd`,
    values: [
      items.map((i) => i.held.id),
      items.map((i) => i.held.leaseToken),
      items.map((i) => Math.max(0, Math.round(i.delayMs))),
      items.map((i) => i.error ?? null),
      items.map((i) => i.park ?? null),
      ...(att?.values ?? []),
    ],
  });
  return new Set(res.rows.map((r) => r.id));
}

/**
 * Unpark: make jobs skipped for these endpoints (they were unknown or disabled when their turn came) due
 * now: run at start by a process that has them enabled. `skipped_since` stays (a process that
 * still has the endpoint disabled keeps its long waits); a real attempt clears it. Reads only the
 * future part of each endpoint's range in the due index. Returns how many were woken.
 */
export async function unparkJobs(db: Queryable, endpoints: readonly string[]): Promise<number> {
  const res = await db.query(
    `update jobs set run_at = now()
      where status = 'pending' and endpoint = any($1::text[]) and run_at > now() and skipped_since is not null`,
    [endpoints],
  );
  return res.rowCount ?? 0;
}

/**
 * Reap: running jobs whose lease expired (their worker crashed or hung) -> pending, or -> dead
 * when no attempt is left, with the dead hook and a NOTIFY in the same transaction. Reads only the
 * partial index on running jobs; at most `batch` jobs per call.
 */
export async function reapJobs(
  pool: pg.Pool,
  opts: { batch: number; channel: string; onDead?: DeadHook | undefined },
): Promise<ReapedRow[]> {
  return withTransaction(pool, async (client) => {
    const res = await client.query<ReapedRow>(
      `with expired as (
           select id, locked_by from jobs where status = 'running' and lease_expires_at < now()
           order by lease_expires_at limit $1 for update skip locked),
         upd as (
           update jobs j set
             status = case when ${ATTEMPTS_SPENT} then 'dead' else 'pending' end,
             run_at = now(),
             last_error = 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped renewing it',
             ${CLEAR_LEASE}
           from expired e where j.id = e.id
           returning j.id, j.status, j.type, j.payload, j.attempts, j.max_attempts, j.last_error, j.event_id, j.endpoint, e.locked_by)
         select upd.*, (select pg_notify($2, '') where exists (select 1 from upd where status = 'pending')) as n from upd`,
      [opts.batch, opts.channel],
    );
    const dead = res.rows.filter((r) => r.status === 'dead');
    if (dead.length > 0 && opts.onDead)
      await opts.onDead(
        client,
        dead.map((r) => toDead(r, 'reaped')),
      );
    return res.rows;
  });
}

// The operator's moves (admin/job-actions.ts checks the state, locks, audits and notifies).

// A new attempt series: due now, attempts reset, no lease, not parked, and its age (notify.webhook.max_age) counted
// from now. last_error stays as history until the next outcome.
const REQUEUE = `status = 'pending', attempts = 0, run_at = now(), completed_at = null, series_started_at = now(), ${NOT_SKIPPED},
  ${CLEAR_LEASE}`;

/** Operator retry: dead or completed -> pending with a fresh attempt series. The caller holds the row lock. */
export async function operatorRetryJob(client: Queryable, id: string): Promise<JobRow> {
  const upd = await client.query<JobRow>(`update jobs set ${REQUEUE} where id = $1 returning ${JOB_COLUMNS}`, [id]);
  return upd.rows[0]!;
}

/** Operator cancel: pending -> cancelled. The caller holds the row lock. */
export async function operatorCancelJob(client: Queryable, id: string): Promise<JobRow> {
  const upd = await client.query<JobRow>(
    `update jobs set status = 'cancelled', ${NOT_SKIPPED}, updated_at = now() where id = $1 returning ${JOB_COLUMNS}`,
    [id],
  );
  return upd.rows[0]!;
}

/**
 * Operator force-delete of an endpoint: every pending job of it -> cancelled (running ones finish;
 * their retries find the endpoint gone). Reads the endpoint's range of the due index. Returns how many.
 */
export async function cancelEndpointJobs(client: Queryable, endpoint: string): Promise<number> {
  const res = await client.query(
    `update jobs set status = 'cancelled', last_error = 'endpoint deleted', ${NOT_SKIPPED}, updated_at = now()
     where status = 'pending' and endpoint = $1`,
    [endpoint],
  );
  return res.rowCount ?? 0;
}

/** Operator redrive: every dead job matching -> pending with a fresh attempt series. Returns how many. */
export async function operatorRedriveJobs(client: Queryable, m: RedriveMatch): Promise<number> {
  const { where, values } = redriveWhere(m);
  // SKIP LOCKED: a dead job the purge is deleting right now is simply not redriven.
  const res = await client.query<{ n: number }>(
    `with v as (select id from jobs where ${where} for update skip locked),
       upd as (update jobs j set ${REQUEUE} from v where j.id = v.id returning 1)
       select count(*)::int as n from upd`,
    values,
  );
  return res.rows[0]?.n ?? 0;
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
  opts: { maxAgeMs: number; batch: number; after?: ExpiryCursor | undefined },
): Promise<{ rows: ExpiredRow[]; next: ExpiryCursor | null }> {
  const res = await client.query<{ examined: number; last_run_at: string; last_id: string } & Partial<ExpiredRow>>(
    `with page as (
         select id, run_at from jobs
         where status = 'pending' and run_at <= now() and (run_at, id) > ($1::timestamptz, $2::uuid)
         order by run_at, id limit $4),
       last as (
         select run_at::text as last_run_at, id as last_id, (select count(*)::int from page) as examined
         from page order by run_at desc, id desc limit 1),
       old as (
         select id from jobs
         where id = any(array(select id from page)) and status = 'pending' and endpoint is not null
           and series_started_at < now() - $3 * interval '1 millisecond'
         for update skip locked),
       upd as (
         update jobs j set status = 'dead', last_error = 'endpoint unavailable', updated_at = now()
         from old where j.id = old.id
         returning j.id, j.type, j.payload, j.attempts, j.endpoint, j.event_id, j.series_started_at)
     select last.*, upd.* from last left join upd on true`,
    [opts.after?.runAt ?? '-infinity', opts.after?.id ?? '00000000-0000-0000-0000-000000000000', opts.maxAgeMs, opts.batch],
  );
  const first = res.rows[0];
  const rows = res.rows.filter((r): r is typeof r & ExpiredRow => r.id !== null && r.id !== undefined);
  const next = first && first.examined >= opts.batch ? { runAt: first.last_run_at, id: first.last_id } : null;
  return { rows, next };
}

/**
 * Replay (operator, docs/operations.md#replaying-an-endpoint): this endpoint's jobs made in
 * [since, until) whose status is listed -> pending with a fresh attempt series, ids kept (the
 * `X-ACW-Event-Id` receivers deduplicate on). Only dead and completed jobs move, whatever the
 * caller lists: a pending job is queued already, a running one belongs to its worker, a cancelled
 * one was stopped on purpose. Reads the endpoint's range of the (endpoint, created_at, id) index;
 * SKIP LOCKED leaves a job the purge is deleting right now. Returns how many moved. The jobs a
 * replay makes for events that had none go through insertJobs.
 */
export async function replayJobs(
  client: Queryable,
  m: { endpoint: string; since: Date; until: Date; statuses: readonly string[] },
): Promise<number> {
  const res = await client.query<{ n: number }>(
    `with v as (
         select id from jobs
         where endpoint = $1 and created_at >= $2 and created_at < $3 and status = any($4::text[]) and status in ('dead', 'completed')
         for update skip locked),
       upd as (update jobs j set ${REQUEUE} from v where j.id = v.id returning 1)
     select count(*)::int as n from upd`,
    [m.endpoint, m.since, m.until, m.statuses],
  );
  return res.rows[0]?.n ?? 0;
}
