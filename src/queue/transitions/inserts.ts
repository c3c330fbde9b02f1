import pg from 'pg';
import { COPY_MIN_ROWS, copyField, copyRows } from '../../db/copy.js';
import type { Queryable } from '../../db/pool.js';
import { epochMs, toLeasedJob, type InsertRow } from '../job-rows.js';
import type { ClaimedJob, NewJob } from '../types.js';
import type { InsertedJobs, LeaseOptions } from '../transition-types.js';
import { insertKeyedJobs } from './ordering.js';

// Inserts: new jobs, pending, or running under a lease of the process that made them (the
// module's rules: ../transitions.ts).

/**
 * Insert many jobs in one statement, with one constant-payload NOTIFY for the lot (delivered at
 * commit). Delayed jobs notify too, so idle workers learn when to set their timer.
 */
export async function enqueueJobs(db: Queryable, jobs: readonly NewJob[], channel: string): Promise<string[]> {
  return (await insertJobs(db, jobs, channel)).ids;
}

/**
 * Insert: -> pending, or -> running for the jobs named in `lease` (insert as running: claim on
 * dispatch), with a fresh lease for `lease.workerId` (one attempt spent, as a claim would): the
 * caller hands them to its worker pool after commit, which saves a claim and a NOTIFY hop per job. Should the process die first, the
 * reaper hands them back when the lease runs out, as after any claim. As in a claim, the endpoint's
 * state row has the last word: a job named in `lease` whose endpoint is paused or whose circuit is
 * not closed goes in pending (held), so a pause is obeyed from the moment it commits, even by a
 * process whose cache has not seen it yet; its slot comes back through the caller's accounting. The NOTIFY goes out only
 * when a job is pending. Leases run from the insert itself (clock_timestamp), not from the start
 * of a transaction that may have run for a while.
 *
 * With `skipExisting`, a job whose id exists already, live or in history, is left as it is and not
 * returned (a webhook job's id is fixed by its event and endpoint, and an event dispatched again
 * must not fail its batch, nor send a finished job again). Without it a live job of that id fails
 * the statement (unique violation on job_queue_pkey, see
 * isExistingJob): the check costs a speculative insertion per row, so the hot path goes without it
 * and retries with it.
 */
export async function insertJobs(
  db: Queryable,
  jobs: readonly NewJob[],
  channel: string,
  lease?: LeaseOptions,
  opts: InsertOptions = {},
): Promise<InsertedJobs> {
  if (jobs.length === 0) return { ids: [], leased: [] };
  if (opts.copy && !opts.skipExisting && db instanceof pg.Client) {
    // Many plain rows (known id, due now, not leased, no ordering key) go by COPY, the rest as below.
    const plain = (j: NewJob): boolean => j.id !== undefined && !j.delayMs && j.orderingKey == null && !lease?.ids.has(j.id);
    const copied = jobs.filter(plain);
    if (copied.length >= COPY_MIN_ROWS) {
      const rest = copied.length === jobs.length ? [] : jobs.filter((j) => !plain(j));
      // One statement at a time on the connection: the COPY, then the others.
      await copyJobs(db, copied, channel);
      const others = rest.length > 0 ? await insertJobs(db, rest, channel, lease) : undefined;
      // In the order given: the copied ones' ids, and the others' as their statement answered them.
      let k = 0;
      return { ids: jobs.map((j) => (plain(j) ? j.id! : others!.ids[k++]!)), leased: others?.leased ?? [] };
    }
  }
  if (jobs.some((j) => j.orderingKey != null)) {
    // Keyed jobs take their place in their key's queue (transitions/ordering.ts); the rest go in as ever.
    const rest = await insertJobs(
      db,
      jobs.filter((j) => j.orderingKey == null),
      channel,
      lease,
      opts,
    );
    const keyed = await insertKeyedJobs(
      db,
      jobs.filter((j) => j.orderingKey != null),
      channel,
      lease,
      opts,
    );
    return { ids: [...rest.ids, ...keyed.ids], leased: [...rest.leased, ...keyed.leased] };
  }
  // One json parameter built by one JSON.stringify, as for attempt rows (attempt-rows.ts): nine
  // arrays cost pg an escape per element (the payload's body escaped twice), 6% of a batch
  // notify's CPU. A JSON null is an SQL null there, hence the coalesce (the payload column is not null).
  let pending = false;
  const rows = jobs.map((j) => {
    const leased = lease !== undefined && j.id !== undefined && !j.delayMs && lease.ids.has(j.id);
    if (!leased) pending = true;
    return {
      id: j.id ?? null,
      type: j.type,
      payload: j.payload ?? null,
      max_attempts: j.maxAttempts,
      delay: Math.max(0, Math.round(j.delayMs ?? 0)),
      event_id: j.eventId ?? null,
      endpoint: j.endpoint ?? null,
      leased,
    };
  });
  if (lease === undefined && !opts.skipExisting && jobs.every((j) => j.id !== undefined)) {
    // Every id known, none leased, none skipped: either all go in or the statement fails, so nothing
    // needs to come back. Not returning a row per job spared PostgreSQL ~10% of a batch notify's
    // job insert (bench/README.md#http-entry-point).
    await db.query({
      name: 'acw_enqueue_known',
      text: `with ins as (
        insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint)
        select t.id, t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts, now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint
        from json_to_recordset($1::json) as t(id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text))
      select pg_notify($2, '')`,
      values: [JSON.stringify(rows), channel],
    });
    return { ids: jobs.map((j) => j.id!), leased: [] };
  }
  const res = await db.query<InsertRow>({
    name: opts.skipExisting ? 'acw_enqueue_skip' : 'acw_enqueue',
    text: `with ins as (
      insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint, status, attempts, locked_by, lease_token, lease_expires_at)
      select coalesce(t.id, gen_random_uuid()), t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts,
        now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint,
        case when l.leased then 'running' else 'pending' end, case when l.leased then 1 else 0 end,
        case when l.leased then $3 end, case when l.leased then gen_random_uuid() end,
        case when l.leased then clock_timestamp() + $4 * interval '1 millisecond' end
      from json_to_recordset($1::json)
        as t(id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text, leased boolean)
      cross join lateral (select t.leased and not exists (
        select 1 from endpoint_state st where st.endpoint = t.endpoint and (st.circuit <> 'closed' or st.paused)) as leased) l
      ${opts.skipExisting ? 'where t.id is null or not exists (select 1 from job_history h where h.id = t.id) on conflict (id) do nothing' : ''}
      returning id, lease_token, ${epochMs('lease_expires_at')} as lease_expires_ms)
    select ins.*, ${epochMs('clock_timestamp()')} as db_now_ms
    from ins, (select case when bool_or(p) then pg_notify($2, '') end from unnest(array[$5::boolean]) p) n`,
    values: [JSON.stringify(rows), channel, lease?.workerId ?? null, lease?.leaseMs ?? 0, pending],
  });
  const ids = res.rows.map((r) => r.id);
  const leased: ClaimedJob[] = [];
  if (lease) {
    const localNow = Date.now();
    const byId = new Map(jobs.map((j) => [j.id, j]));
    for (const r of res.rows) {
      if (r.lease_token === null || r.lease_expires_ms === null) continue;
      const j = byId.get(r.id);
      if (!j) continue;
      leased.push(toLeasedJob(j, { ...r, lease_token: r.lease_token, lease_expires_ms: r.lease_expires_ms }, localNow));
    }
  }
  return { ids, leased };
}

export interface InsertOptions {
  /** Leave jobs that exist already alone instead of failing (see insertJobs). */
  skipExisting?: boolean;
  /**
   * `db` is one connection inside the caller's transaction: fifty plain jobs or more (a known id,
   * due now, not leased, no ordering key) go in by COPY (src/db/copy.ts), with their NOTIFY after.
   * Not with `skipExisting`, which COPY cannot do.
   */
  copy?: boolean;
}

/** Plain jobs (see InsertOptions.copy) by COPY, and the NOTIFY an insert statement makes, in one round trip. */
async function copyJobs(client: pg.ClientBase, jobs: readonly NewJob[], channel: string): Promise<void> {
  let text = '';
  for (const j of jobs)
    text += `${j.id}\t${copyField(j.type)}\t${copyField(JSON.stringify(j.payload ?? null))}\t${j.maxAttempts}\t${j.eventId ?? '\\N'}\t${copyField(j.endpoint)}\n`;
  const sql = `copy job_queue (id, type, payload, max_attempts, event_id, endpoint) from stdin; select pg_notify(${pg.escapeLiteral(channel)}, '')`;
  const rows = await copyRows(client, sql, text);
  if (rows !== jobs.length) throw new Error(`COPY wrote ${rows} of ${jobs.length} jobs`);
}

/** An event's statement and its jobs, written as one (insertWithJobs). */
export interface WithJobs {
  /**
   * The statement that writes the event, with its parameters ($1..$n): the first part of this one.
   * It returns a row when it wrote the event; when it returns none (an `on conflict do nothing`
   * that met a taken key), no job goes in and nothing is notified.
   */
  first: { text: string; values: unknown[] };
  /** Due now, none leased: the jobs' ids and endpoints, one each. */
  ids: readonly string[];
  endpoints: readonly string[];
  type: string;
  maxAttempts: number;
  eventId: string;
  /** Their payload's topic: the jobs carry no body, their event has it (docs/architecture.md#bodies-by-reference). */
  topic: string;
  /** Carried in the payload as `schema_version` when not null (the X-ACW-Schema-Version header). */
  schemaVersion?: number | null;
  /** Its prepared statement's name: one per `first.text`. */
  name: string;
  /** A trace context the payload carries too (`traceparent`, `tracestate`; docs/operations.md#tracing). */
  trace?: { traceparent: string; tracestate?: string | undefined };
}

/**
 * One statement for a notify of one event in autocommit (src/notify/notify.ts): the event goes in
 * with its jobs, pending, and the NOTIFY is sent, atomically, in one round trip instead of the
 * four (begin, two inserts, commit) of a transaction. Answers whether `first` wrote the event (and
 * so the jobs went in).
 */
export async function insertWithJobs(db: Queryable, w: WithJobs, channel: string): Promise<boolean> {
  const n = w.first.values.length;
  const p = (k: number): string => `$${n + k}`;
  // A statement of its own with a trace context: the payload without one is built as before.
  const traced = w.trace ? `, 'traceparent', ${p(9)}::text` + (w.trace.tracestate ? `, 'tracestate', ${p(10)}::text` : '') : '';
  const res = await db.query<{ written: boolean }>({
    name: w.trace ? `${w.name}_traced${w.trace.tracestate ? '_state' : ''}` : w.name,
    text: `with first as (${w.first.text}), ins as (
      insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint)
      select j.id, ${p(1)}, jsonb_build_object('topic', ${p(2)}::text${traced})
          || case when ${p(7)}::int is null then '{}'::jsonb else jsonb_build_object('schema_version', ${p(7)}::int) end,
        ${p(3)}, now(), ${p(4)}, j.endpoint
      from unnest(${p(5)}::uuid[], ${p(6)}::text[]) as j(id, endpoint)
      where exists (select 1 from first))
    select w.written, case when w.written and cardinality(${p(5)}::uuid[]) > 0 then pg_notify(${p(8)}, '') end
    from (select exists (select 1 from first) as written) w`,
    values: [
      ...w.first.values,
      w.type,
      w.topic,
      w.maxAttempts,
      w.eventId,
      w.ids,
      w.endpoints,
      w.schemaVersion ?? null,
      channel,
      ...(w.trace ? [w.trace.traceparent, ...(w.trace.tracestate ? [w.trace.tracestate] : [])] : []),
    ],
  });
  return res.rows[0]?.written === true;
}

/** The error of a job insert (without `skipExisting`) that met an existing job id. */
export function isExistingJob(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === '23505' && e.constraint === 'job_queue_pkey';
}
