import type pg from 'pg';
import { withTransaction, type Queryable } from '../../db/pool.js';
import { RETURNING, SET_RUNNING, epochMs, toClaimed, toLeasedJob, type ClaimRow, type InsertRow } from '../job-rows.js';
import type { AttemptRecord, ClaimedJob, DeadHook, LeaseRef, NewJob } from '../types.js';
import type { FailItem, FailResult, InsertedJobs, LeaseOptions } from '../transition-types.js';
import { completeJobs, failJobsIn } from './outcomes.js';

// Ordered delivery (docs/operations.md#ordered-delivery; migration "ordering"): per endpoint and
// ordering key one live job, the key's head; the others wait with status 'behind', which no claim
// reads. A key's head changes only under its ordering_keys row's lock, in a statement that runs
// after the lock was taken: that statement sees every job a dispatcher holding the lock before it
// committed, so no job is left behind a head that is gone, and no key gets two heads.

/** A (endpoint, key) pair. */
export interface KeyRef {
  endpoint: string;
  key: string;
}

/** A job that left job_queue (or went dead) while it may have been its key's head. */
export interface FinishedKeyed extends KeyRef {
  id: string;
  dead: boolean;
}

export interface Advanced {
  /** Next jobs handed, already claimed, to the worker that finished their key's head. */
  handed: ClaimedJob[];
  /** Keys of strict endpoints whose head just went dead: held until an operator acts. */
  blocked: Array<KeyRef & { head: string }>;
}

/**
 * Insert keyed jobs (with insertJobs' lease and skip rules): per (endpoint, key), in input order,
 * each takes the key's next sequence number and queue position; the first becomes the head when
 * the key has none (pending, or running under `lease`), the rest go behind. The key rows are
 * locked in bytewise order, as completions lock them, so the two cannot deadlock.
 */
export async function insertKeyedJobs(
  db: Queryable,
  jobs: readonly NewJob[],
  channel: string,
  lease?: LeaseOptions,
  opts: { skipExisting?: boolean } = {},
): Promise<InsertedJobs> {
  if (jobs.length === 0) return { ids: [], leased: [] };
  const rows = jobs.map((j) => ({
    id: j.id,
    type: j.type,
    payload: j.payload ?? null,
    max_attempts: j.maxAttempts,
    delay: Math.max(0, Math.round(j.delayMs ?? 0)),
    event_id: j.eventId ?? null,
    endpoint: j.endpoint,
    okey: j.orderingKey,
    strict: j.strictOrdering === true,
    leased: lease !== undefined && j.id !== undefined && !j.delayMs && lease.ids.has(j.id),
  }));
  const skip = opts.skipExisting
    ? `where not exists (select 1 from job_queue q where q.id = t.id) and not exists (select 1 from job_history h where h.id = t.id)`
    : '';
  const res = await db.query<InsertRow & { status: string }>({
    name: opts.skipExisting ? 'acw_enqueue_keyed_skip' : 'acw_enqueue_keyed',
    text: `with t as materialized (
        select t.* from rows from (json_to_recordset($1::json)
          as (id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text, okey text, strict boolean,
              leased boolean)) with ordinality as t(id, type, payload, max_attempts, delay, event_id, endpoint, okey, strict, leased, n) ${skip}),
      g as (
        select endpoint, okey, count(*) as k, (array_agg(id order by n))[1] as first_id, bool_or(strict) as strict
        from t group by endpoint, okey),
      kr as (
        insert into ordering_keys as o (endpoint, ordering_key, last_seq, last_pos, head, strict)
        select endpoint, okey, k, k, first_id, strict from g order by endpoint collate "C", okey collate "C"
        on conflict (endpoint, ordering_key) do update set last_seq = o.last_seq + excluded.last_seq,
          last_pos = o.last_pos + excluded.last_pos, strict = excluded.strict, updated_at = now(),
          -- The head stays while the key has one. Whether it still exists is not asked: a head a
          -- concurrent dispatcher wrote is not in this statement's snapshot (read committed), though
          -- its key row is, and asking made a second head (seen in the chaos suite).
          head = coalesce(o.head, excluded.head)
        returning o.endpoint, o.ordering_key, o.last_seq, o.last_pos, o.head),
      r as (
        select t.*, kr.head = t.id as is_head,
          kr.last_seq - g.k + row_number() over (partition by t.endpoint, t.okey order by t.n) as seq,
          kr.last_pos - g.k + row_number() over (partition by t.endpoint, t.okey order by t.n) as pos
        from t join g on g.endpoint = t.endpoint and g.okey = t.okey
          join kr on kr.endpoint = t.endpoint and kr.ordering_key = t.okey),
      ins as (
        insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint, ordering_key, ordering_seq, ordering_pos,
          status, attempts, locked_by, lease_token, lease_expires_at)
        select r.id, r.type, coalesce(r.payload, 'null'::jsonb), r.max_attempts, now() + r.delay * interval '1 millisecond', r.event_id,
          r.endpoint, r.okey, r.seq, r.pos,
          case when not r.is_head then 'behind' when l.leased then 'running' else 'pending' end,
          case when r.is_head and l.leased then 1 else 0 end,
          case when r.is_head and l.leased then $3 end, case when r.is_head and l.leased then gen_random_uuid() end,
          case when r.is_head and l.leased then clock_timestamp() + $4 * interval '1 millisecond' end
        from r cross join lateral (select r.leased and not exists (
          select 1 from endpoint_state st where st.endpoint = r.endpoint and (st.circuit <> 'closed' or st.paused)) as leased) l
        order by r.n
        returning id, status, lease_token, ${epochMs('lease_expires_at')} as lease_expires_ms, ordering_seq)
    select ins.*, ${epochMs('clock_timestamp()')} as db_now_ms,
      (select pg_notify($2, '') where exists (select 1 from ins where status = 'pending')) is null as _n
    from ins`,
    values: [JSON.stringify(rows), channel, lease?.workerId ?? null, lease?.leaseMs ?? 0],
  });
  const leased: ClaimedJob[] = [];
  if (lease) {
    const localNow = Date.now();
    const byId = new Map(jobs.map((j) => [j.id, j]));
    for (const r of res.rows) {
      if (r.lease_token === null || r.lease_expires_ms === null) continue;
      const j = byId.get(r.id);
      if (j) leased.push(toLeasedJob(j, { ...r, lease_token: r.lease_token, lease_expires_ms: r.lease_expires_ms }, localNow));
    }
  }
  return { ids: res.rows.map((r) => r.id), leased };
}

/** Lock these keys' rows, in bytewise order (the order every writer of a key's head takes them in). */
export async function lockKeys(db: Queryable, keys: readonly KeyRef[]): Promise<void> {
  if (keys.length === 0) return;
  await db.query({
    name: 'acw_ordering_lock',
    text: `select 1 from ordering_keys o
      where (o.endpoint, o.ordering_key) in (select * from unnest($1::text[], $2::text[]))
      order by o.endpoint collate "C", o.ordering_key collate "C" for update`,
    values: [keys.map((k) => k.endpoint), keys.map((k) => k.key)],
  });
}

/**
 * Move keys on past heads that finished: each key whose head is one of `finished` gets its next job
 * (one read of job_queue_behind_idx) as its head, running under `lease` (the worker that finished
 * the head: it gets it without a claim) or pending; none left, the key is idle. A dead head of a
 * strict key stays its head and blocks it. Locks the keys first, then moves them in a statement of
 * its own (see the top of this file). Call it in the transaction that finished the heads.
 */
export async function advanceKeys(
  db: Queryable,
  finished: readonly FinishedKeyed[],
  /** Where to NOTIFY when a next job goes in pending; null: the workers' poll finds it. */
  channel: string | null,
  lease?: { workerId: string; leaseMs: number },
  locked = false,
): Promise<Advanced> {
  if (finished.length === 0) return { handed: [], blocked: [] };
  if (!locked) await lockKeys(db, finished);
  const res = await db.query<
    ClaimRow & { kind: 'handed' | 'notified' | 'blocked'; head: string | null; key_endpoint: string | null; key: string | null }
  >({
    name: 'acw_ordering_advance',
    text: `with f as (select * from unnest($3::text[], $4::text[], $5::uuid[], $6::boolean[]) f(endpoint, okey, id, dead)),
      k as (
        select o.endpoint, o.ordering_key, o.strict and f.dead as blocks, f.id
        from ordering_keys o join f on o.endpoint = f.endpoint and o.ordering_key = f.okey and o.head = f.id),
      nxt as (
        select k.endpoint, k.ordering_key, b.id from k left join lateral (
          select q.id from job_queue q where q.status = 'behind' and q.endpoint = k.endpoint and q.ordering_key = k.ordering_key
          order by q.ordering_pos limit 1 for update) b on true
        where not k.blocks),
      l as (
        select nxt.id, $1::text is not null and not exists (
          select 1 from endpoint_state st where st.endpoint = nxt.endpoint and (st.circuit <> 'closed' or st.paused)) as leased
        from nxt where nxt.id is not null),
      run as (update job_queue j set ${SET_RUNNING} from l where j.id = l.id and l.leased returning ${RETURNING}),
      pend as (update job_queue j set status = 'pending', updated_at = now() from l where j.id = l.id and not l.leased returning j.id),
      heads as (
        update ordering_keys o set head = case when k.blocks then o.head else nxt.id end,
          blocked_at = case when k.blocks then now() end, updated_at = now()
        from k left join nxt on nxt.endpoint = k.endpoint and nxt.ordering_key = k.ordering_key
        where o.endpoint = k.endpoint and o.ordering_key = k.ordering_key
        returning o.endpoint, o.ordering_key, o.head, k.blocks)
      select 'handed' as kind, null::uuid as head, null::text as key_endpoint, null::text as key, run.* from run
      union all
      select 'blocked', heads.head, heads.endpoint, heads.ordering_key, run.* from heads left join run on false where heads.blocks
      union all
      select 'notified', null, null, null, run.* from (select pg_notify($7, '') from pend where $7::text is not null limit 1) n left join run on false`,
    values: [
      lease?.workerId ?? null,
      lease?.leaseMs ?? 0,
      finished.map((f) => f.endpoint),
      finished.map((f) => f.key),
      finished.map((f) => f.id),
      finished.map((f) => f.dead),
      channel,
    ],
  });
  const localNow = Date.now();
  return {
    handed: res.rows.filter((r) => r.kind === 'handed').map((r) => toClaimed(r, localNow)),
    blocked: res.rows.filter((r) => r.kind === 'blocked').map((r) => ({ endpoint: r.key_endpoint!, key: r.key!, head: r.head! })),
  };
}

/**
 * Jobs just taken back from history into job_queue as pending (operator retry, redrive, replay):
 * the keyed ones join their key's queue, in sequence order, at its end. Where the key has no head
 * (or its head is one of them: a blocked key's head retried), the first becomes the head and the
 * key is no longer blocked; the others wait behind.
 */
export async function requeueKeyed(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const keyed = await db.query<{ endpoint: string; ordering_key: string }>(
    `select distinct endpoint, ordering_key from job_queue where id = any($1::uuid[]) and ordering_key is not null and endpoint is not null`,
    [ids],
  );
  if (keyed.rows.length === 0) return;
  const keys = keyed.rows.map((r) => ({ endpoint: r.endpoint, key: r.ordering_key }));
  // A key that has no row yet (its jobs were made before ordering existed, or its row was lost).
  await db.query(
    `insert into ordering_keys (endpoint, ordering_key, last_seq, last_pos)
     select e, k, 0, 0 from unnest($1::text[], $2::text[]) u(e, k) order by e collate "C", k collate "C"
     on conflict do nothing`,
    [keys.map((k) => k.endpoint), keys.map((k) => k.key)],
  );
  await lockKeys(db, keys);
  await db.query(
    `with r as (
        select q.id, q.endpoint, q.ordering_key, row_number() over (partition by q.endpoint, q.ordering_key order by q.ordering_seq, q.id) as rn
        from job_queue q where q.id = any($1::uuid[]) and q.ordering_key is not null and q.endpoint is not null),
      o as (
        select o.endpoint, o.ordering_key, o.last_pos,
          o.head is null or o.head = any($1::uuid[]) or (o.blocked_at is null and not exists (select 1 from job_queue q where q.id = o.head)) as free
        from ordering_keys o join (select distinct endpoint, ordering_key from r) d on d.endpoint = o.endpoint and d.ordering_key = o.ordering_key),
      upd as (
        update job_queue j set ordering_pos = o.last_pos + r.rn, status = case when o.free and r.rn = 1 then 'pending' else 'behind' end
        from r join o on o.endpoint = r.endpoint and o.ordering_key = r.ordering_key where j.id = r.id
        returning j.id, j.endpoint, j.ordering_key, j.status)
     update ordering_keys k set last_pos = k.last_pos + c.n, updated_at = now(),
       head = case when o.free then c.first else k.head end, blocked_at = case when o.free then null else k.blocked_at end
     from (select endpoint, ordering_key, count(*) as n, (array_agg(id) filter (where status = 'pending'))[1] as first from upd
           group by endpoint, ordering_key) c
       join o on o.endpoint = c.endpoint and o.ordering_key = c.ordering_key
     where k.endpoint = c.endpoint and k.ordering_key = c.ordering_key`,
    [ids],
  );
}

/** What finishKeyedJobs wrote: as completeJobs and failJobs answer, and what moved the keys on. */
export interface KeyedOutcomes extends Advanced {
  completed: Set<string>;
  failed: FailResult;
}

/**
 * Outcomes of keyed jobs, in one transaction: their keys locked first, then the completions and
 * failures written by completeJobs' and failJobs' statements, then the keys moved past the heads
 * that finished (advanceKeys; the next job of each goes to `lease`'s worker), the dead hook last.
 */
export async function finishKeyedJobs(
  pool: pg.Pool,
  completes: ReadonlyArray<{ leased: LeaseRef; attempt?: AttemptRecord | undefined; key: KeyRef }>,
  fails: ReadonlyArray<FailItem & { key: KeyRef }>,
  opts: { channel: string | null; lease?: { workerId: string; leaseMs: number }; onDead?: DeadHook | undefined },
): Promise<KeyedOutcomes> {
  return withTransaction(pool, async (client) => {
    await lockKeys(client, [...completes.map((c) => c.key), ...fails.map((f) => f.key)]);
    const completed = await completeJobs(client, completes);
    const { result, dead } = await failJobsIn(client, fails);
    const finished: FinishedKeyed[] = [];
    for (const c of completes) if (completed.has(c.leased.id)) finished.push({ ...c.key, id: c.leased.id, dead: false });
    for (const f of fails) if (result.changed.get(f.leased.id)?.status === 'dead') finished.push({ ...f.key, id: f.leased.id, dead: true });
    const adv = await advanceKeys(client, finished, opts.channel, opts.lease, true);
    if (dead.length > 0 && opts.onDead) await opts.onDead(client, dead);
    return { completed, failed: result, ...adv };
  });
}
