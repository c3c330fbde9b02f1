import type { Queryable } from '../../db/pool.js';
import { RETURNING, SET_RUNNING, toClaimed, type ClaimRow } from '../job-rows.js';
import type { ClaimedJob } from '../types.js';
import type { ClaimOptions } from '../transition-types.js';

// Claims: pending -> running, by the worker pool and by the circuit breaker's probe (the module's
// rules: ../transitions.ts).

/**
 * Any due job of the given types, oldest first, from the `(run_at, id)` index of pending jobs.
 * The update finds the chosen rows through `= any(array(...))` so that even a generic plan of the
 * prepared statement reaches them by primary key instead of joining against a scan of `jobs`.
 */
const CLAIM_SQL = `with due as (
    select id from job_queue
    where status = 'pending' and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
    order by run_at, id limit $3 for update skip locked)
  update job_queue j set ${SET_RUNNING} where j.id = any(array(select id from due)) returning ${RETURNING}`;

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
      select id, run_at from job_queue
      where status = 'pending' and endpoint = eps.ep and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit least(eps.n, $3) for update skip locked) d where eps.n > 0),
  fair as (select id, run_at, rn from by_endpoint order by rn, run_at, id limit $3),
  unkeyed as (
    select u.id, u.run_at, row_number() over (order by u.run_at, u.id) as rn from (
      select id, run_at from job_queue
      where $7::int > 0 and status = 'pending' and endpoint is null and run_at <= now() and ($4::text[] is null or type = any($4::text[]))
      order by run_at, id limit $7 for update skip locked) u),
  chosen as (select id from (select * from fair union all select * from unkeyed) c order by rn, run_at, id limit $8),
  upd as (update job_queue j set ${SET_RUNNING} where j.id = any(array(select id from chosen)) returning ${RETURNING}),
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
          and exists (select 1 from job_queue where status = 'pending' and endpoint = s.endpoint and run_at <= now() and type = $5)
        order by s.endpoint for update of s skip locked),
      pick as (
        select p.id, due.endpoint, due.deadline_ms from due cross join lateral (
          select id from job_queue where status = 'pending' and endpoint = due.endpoint and run_at <= now() and type = $5
          order by run_at, id limit 1 for update skip locked) p),
      upd as (update job_queue j set ${SET_RUNNING} from pick where j.id = pick.id returning ${RETURNING}),
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
