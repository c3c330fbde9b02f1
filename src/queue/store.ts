import type { Queryable } from '../db/pool.js';
import type { Held } from './outcomes.js';
import type { ClaimPlan } from './slots.js';
import type { ClaimedJob, NewJob } from './types.js';

/**
 * The queue's SQL for taking work: inserting jobs, claiming them, renewing leases, and the cheap
 * index probes the worker loop needs. Batches go through arrays (`unnest`). What happens to a
 * claimed job afterwards (complete, fail, release) is in outcomes.ts.
 */

interface ClaimRow {
  id: string;
  type: string;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  lease_token: string;
  /** Epoch milliseconds (float8): cheaper to read than a timestamptz parsed into a Date. */
  lease_expires_ms: number;
  event_id: string | null;
  endpoint: string | null;
  created_ms: number;
  parked_since_ms: number | null;
  skipped_since_ms: number | null;
  db_now_ms: number;
}

export interface ClaimOptions {
  workerId: string;
  leaseMs: number;
  types?: readonly string[];
  /** Without a plan: any due job, oldest first, at most this many. */
  limit?: number;
  /**
   * What a worker pool may take (SlotBudget.beginClaim). With per-endpoint slots, only those
   * endpoints are read (an endpoint at 0 is skipped without reading its backlog), round-robin.
   */
  plan?: ClaimPlan;
}

const RETURNING = `j.id, j.type, j.payload, j.attempts, j.max_attempts, j.lease_token,
  extract(epoch from j.lease_expires_at)::float8 * 1000 as lease_expires_ms,
  j.event_id, j.endpoint, extract(epoch from j.created_at)::float8 * 1000 as created_ms,
  extract(epoch from j.parked_since)::float8 * 1000 as parked_since_ms,
  extract(epoch from j.skipped_since)::float8 * 1000 as skipped_since_ms, extract(epoch from now())::float8 * 1000 as db_now_ms`;

const SET_RUNNING = `status = 'running', locked_by = $1, lease_token = gen_random_uuid(),
  lease_expires_at = now() + $2 * interval '1 millisecond', attempts = j.attempts + 1, updated_at = now()`;

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
 */
const CLAIM_SLOTS_SQL = `with eps as (select ep, n from unnest($5::text[], $6::int[]) s(ep, n) where n > 0),
  by_endpoint as (
    select d.id, d.run_at, row_number() over (partition by eps.ep order by d.run_at, d.id) as rn from eps cross join lateral (
      select id, run_at from jobs
      where status = 'pending' and endpoint = eps.ep and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit least(eps.n, $3) for update skip locked) d),
  fair as (select id, run_at, rn from by_endpoint order by rn, run_at, id limit $3),
  unkeyed as (
    select u.id, u.run_at, row_number() over (order by u.run_at, u.id) as rn from (
      select id, run_at from jobs
      where $7::int > 0 and status = 'pending' and endpoint is null and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit $7 for update skip locked) u),
  chosen as (select id from (select * from fair union all select * from unkeyed) c order by rn, run_at, id limit $8)
  update jobs j set ${SET_RUNNING} where j.id = any(array(select id from chosen)) returning ${RETURNING}`;

export async function claimJobs(db: Queryable, opts: ClaimOptions): Promise<ClaimedJob[]> {
  const plan = opts.plan;
  const slots = plan?.endpoints;
  const res =
    plan && slots
      ? await db.query<ClaimRow>({
          name: 'acw_claim_fair',
          text: CLAIM_SLOTS_SQL,
          values: [opts.workerId, opts.leaseMs, plan.deliveries, opts.types ?? null, [...slots.keys()], [...slots.values()], plan.workers, plan.total],
        })
      : await db.query<ClaimRow>({
          name: 'acw_claim',
          text: CLAIM_SQL,
          values: [opts.workerId, opts.leaseMs, plan ? plan.total : (opts.limit ?? 1), opts.types ?? null],
        });
  const localNow = Date.now();
  return res.rows.map((r) => toClaimed(r, localNow));
}

function toClaimed(r: ClaimRow, localNow: number): ClaimedJob {
  // The lease is judged on the database clock; carry it over to ours through the offset at claim.
  const offset = r.db_now_ms - localNow;
  return {
    id: r.id,
    type: r.type,
    payload: r.payload,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    leaseToken: r.lease_token,
    leaseExpiresAt: r.lease_expires_ms - offset,
    eventId: r.event_id,
    endpoint: r.endpoint,
    createdAt: new Date(r.created_ms),
    parkedSince: r.parked_since_ms === null ? null : new Date(r.parked_since_ms),
    skippedSince: r.skipped_since_ms === null ? null : new Date(r.skipped_since_ms),
  };
}

/** Jobs inserted already claimed by this process (claim on dispatch): its worker id and lease length. */
export interface HoldOptions {
  workerId: string;
  leaseMs: number;
  /** Ids (set on the NewJob) of the jobs to insert as `running`; the rest go in as `pending`. */
  ids: ReadonlySet<string>;
}

/**
 * Insert many jobs in one statement, with one constant-payload NOTIFY for the lot (delivered at
 * commit). Delayed jobs notify too, so idle workers learn when to set their timer.
 */
export async function enqueueJobs(db: Queryable, jobs: readonly NewJob[], channel: string): Promise<string[]> {
  return (await insertJobs(db, jobs, channel)).ids;
}

export interface InsertedJobs {
  ids: string[];
  /** The jobs inserted as `running` under `hold`, as if claimed: attempt 1 spent, lease issued. */
  held: ClaimedJob[];
}

interface InsertRow {
  id: string;
  lease_token: string | null;
  lease_expires_ms: number | null;
  db_now_ms: number;
}

/**
 * enqueueJobs, where the jobs named in `hold` go in as `running` with a fresh lease for
 * `hold.workerId` (one attempt spent, as a claim would): the caller hands them to its worker pool
 * after commit, which saves a claim and a NOTIFY hop per job. Should the process die first, the
 * reaper hands them back when the lease runs out, as after any claim. The NOTIFY goes out only
 * when a job is pending. Leases run from the insert itself (clock_timestamp), not from the start
 * of a transaction that may have run for a while.
 *
 * With `skipExisting`, a job whose id exists already is left as it is and not returned (a webhook
 * job's id is fixed by its event and endpoint, and an event dispatched again must not fail its
 * batch). Without it such a job fails the statement (unique violation on jobs_pkey): the check
 * costs a speculative insertion per row, so the hot path goes without it and retries with it.
 */
export async function insertJobs(
  db: Queryable,
  jobs: readonly NewJob[],
  channel: string,
  hold?: HoldOptions,
  opts: { skipExisting?: boolean } = {},
): Promise<InsertedJobs> {
  if (jobs.length === 0) return { ids: [], held: [] };
  const heldFlags = jobs.map((j) => hold !== undefined && j.id !== undefined && !j.delayMs && hold.ids.has(j.id));
  const res = await db.query<InsertRow>({
    name: opts.skipExisting ? 'acw_enqueue_skip' : 'acw_enqueue',
    text: `with ins as (
      insert into jobs (id, type, payload, max_attempts, run_at, event_id, endpoint, status, attempts, locked_by, lease_token, lease_expires_at)
      select coalesce(t.id, gen_random_uuid()), t.type, t.payload, t.max_attempts,
        now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint,
        case when t.held then 'running' else 'pending' end, case when t.held then 1 else 0 end,
        case when t.held then $10 end, case when t.held then gen_random_uuid() end,
        case when t.held then clock_timestamp() + $11 * interval '1 millisecond' end
      from unnest($8::uuid[], $1::text[], $2::jsonb[], $3::int[], $4::int[], $5::uuid[], $6::text[], $9::boolean[])
        as t(id, type, payload, max_attempts, delay, event_id, endpoint, held)
      ${opts.skipExisting ? 'on conflict (id) do nothing' : ''}
      returning id, lease_token, extract(epoch from lease_expires_at)::float8 * 1000 as lease_expires_ms)
    select ins.*, extract(epoch from clock_timestamp())::float8 * 1000 as db_now_ms
    from ins, (select case when bool_or(not h) then pg_notify($7, '') end from unnest($9::boolean[]) h) n`,
    values: [
      jobs.map((j) => j.type),
      jobs.map((j) => JSON.stringify(j.payload ?? null)),
      jobs.map((j) => j.maxAttempts),
      jobs.map((j) => Math.max(0, Math.round(j.delayMs ?? 0))),
      jobs.map((j) => j.eventId ?? null),
      jobs.map((j) => j.endpoint ?? null),
      channel,
      jobs.map((j) => j.id ?? null),
      heldFlags,
      hold?.workerId ?? null,
      hold?.leaseMs ?? 0,
    ],
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
      held.push({
        id: r.id,
        type: j.type,
        payload: j.payload,
        attempts: 1,
        maxAttempts: j.maxAttempts,
        leaseToken: r.lease_token,
        leaseExpiresAt: r.lease_expires_ms - (r.db_now_ms - localNow),
        eventId: j.eventId ?? null,
        endpoint: j.endpoint ?? null,
        createdAt: new Date(r.db_now_ms),
        parkedSince: null,
        skippedSince: null,
      });
    }
  }
  return { ids, held };
}

/** The error of a job insert (without `skipExisting`) that met an existing job id. */
export function isExistingJob(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === '23505' && e.constraint === 'jobs_pkey';
}

/** Renew the leases of every job held; returns the new expiry (database clock) of those still held. */
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
  return new Map(res.rows.map((r) => [r.id, r.lease_expires_at.getTime() - (r.db_now.getTime() - localNow)]));
}

/**
 * The endpoints that have pending jobs, by a loose index scan (one probe per endpoint): how a
 * worker finds jobs for endpoints missing from its config (a rolling deploy) without a table scan.
 */
export async function pendingEndpoints(db: Queryable): Promise<string[]> {
  const res = await db.query<{ endpoint: string }>({
    name: 'acw_pending_endpoints',
    text: `with recursive e as (
        (select endpoint from jobs where status = 'pending' and endpoint is not null order by endpoint limit 1)
        union all
        select (select endpoint from jobs where status = 'pending' and endpoint > e.endpoint order by endpoint limit 1)
        from e where e.endpoint is not null)
      select endpoint from e where endpoint is not null`,
  });
  return res.rows.map((r) => r.endpoint);
}

/** When the next pending job falls due (ms from now), read from the first entry of the due index. */
export async function nextDueIn(db: Queryable): Promise<number | null> {
  const res = await db.query<{ ms: number | null }>({
    name: 'acw_next_due',
    text: `select extract(epoch from (run_at - now())) * 1000 as ms from jobs
      where status = 'pending' order by run_at, id limit 1`,
  });
  const ms = res.rows[0]?.ms;
  return ms === undefined || ms === null ? null : Math.max(0, Number(ms));
}

/**
 * Make jobs skipped for these endpoints (they were unknown or disabled when their turn came) due
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
