import type { ClaimedJob, DeadJob, DeadReason, JobEvent, JobStatus, NewJob } from './types.js';

/**
 * What the statements of transitions.ts share (SQL fragments, each rule written once), the rows
 * they return and how those become the queue's types. The statements themselves are in
 * transitions.ts.
 */

/** Lease gone: no worker has the job leased. */
export const CLEAR_LEASE = `locked_by = null, lease_token = null, lease_expires_at = null, updated_at = now()`;
/** A real attempt or an operator's move ends a series of skipped turns (see unparkJobs). */
export const NOT_SKIPPED = `parked_since = null, skipped_since = null`;
/**
 * A job this worker holds, found through its id and lease (`t`: a row of the statement's id and
 * lease_token arrays). The status is tested with `is true` (the same test: status is never null) so
 * that the planner cannot answer it from job_queue_running_idx: with few running jobs in its
 * statistics it would read every running job to find the few of a batch, where the primary key
 * finds each at once (bench/README.md, "Cost per delivery").
 */
export const HELD = `j.id = t.id and j.lease_token = t.lease_token and (j.status = 'running') is true`;
/** The attempt just taken (or lost with its lease) was the last one: the job goes dead. */
export const ATTEMPTS_SPENT = `j.attempts >= j.max_attempts`;

/** Claim (and insert as running): one attempt spent, a fresh lease on the database clock. */
export const SET_RUNNING = `status = 'running', locked_by = $1, lease_token = gen_random_uuid(),
  lease_expires_at = now() + $2 * interval '1 millisecond', attempts = j.attempts + 1, updated_at = now()`;

/** The columns a claim returns (`RETURNING`), read by `toClaimed`. */
export interface ClaimRow {
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
  ordering_key: string | null;
  /** bigint, as text. */
  ordering_seq: string | null;
  created_ms: number;
  parked_since_ms: number | null;
  skipped_since_ms: number | null;
  db_now_ms: number;
  /** JOB_EVENT as node-postgres parsed it. */
  event: { data: unknown; ms: number } | null;
}

/**
 * Epoch milliseconds of a timestamptz, as float8. `date_part` computes in float8, where
 * `extract(epoch ...)` computes a numeric (PostgreSQL 14 on) that is then cast: numeric division
 * per column and row, a few percent of PostgreSQL's time on the hot path (bench/README.md, "Cost
 * per delivery").
 */
export const epochMs = (ts: string): string => `date_part('epoch', ${ts}) * 1000`;

/**
 * A claimed job's event (JobEvent), for a job whose payload carries no body: one primary-key read of
 * `events`, the day partition of `event_log` found at run time from the id (and, until the purge drops
 * it, the table of events from before migration 0012: a second probe). A job that carries its body,
 * or has no event, reads nothing.
 */
export const JOB_EVENT = `case when j.event_id is null or j.payload ? 'body' then null else (
    select jsonb_build_object('data', e.data, 'ms', round(date_part('epoch', date_trunc('milliseconds', e.created_at, 'UTC')) * 1000))
    from events e where e.id = j.event_id) end`;

/** What a claim returns, read by `toClaimed`. */
export const RETURNING = `j.id, j.type, j.payload, j.attempts, j.max_attempts, j.lease_token,
  ${epochMs('j.lease_expires_at')} as lease_expires_ms,
  j.event_id, j.endpoint, j.ordering_key, j.ordering_seq, ${epochMs('j.created_at')} as created_ms,
  ${epochMs('j.parked_since')} as parked_since_ms,
  ${epochMs('j.skipped_since')} as skipped_since_ms, ${epochMs('now()')} as db_now_ms, ${JOB_EVENT} as event`;

/**
 * The JobEvent of a JOB_EVENT value; null stays null. created_at comes as whole milliseconds since
 * the epoch, truncated as node-postgres dates it (a float8 within a millisecond's fraction of the
 * whole count, rounded to it: exact for any year to 9999), cheaper than to_char per row.
 */
export function toJobEvent(v: { data: unknown; ms: number } | null): JobEvent | null {
  if (v === null) return null;
  // node-postgres parsed the jsonb text, whose object keys are in jsonb's order: JSON.stringify keeps it.
  return { dataJson: JSON.stringify(v.data), occurredAt: new Date(v.ms).toISOString() };
}

/**
 * A database-clock instant on this process's clock, through the offset between the two read
 * together (`dbNowMs` from the same statement, `localNow` when its answer came).
 */
export function dbToLocal(dbMs: number, dbNowMs: number, localNow: number): number {
  return dbMs - (dbNowMs - localNow);
}

export function toClaimed(r: ClaimRow, localNow: number): ClaimedJob {
  return {
    id: r.id,
    type: r.type,
    payload: r.payload,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    leaseToken: r.lease_token,
    // The lease is judged on the database clock; carry it over to ours.
    leaseExpiresAt: dbToLocal(r.lease_expires_ms, r.db_now_ms, localNow),
    eventId: r.event_id,
    endpoint: r.endpoint,
    orderingKey: r.ordering_key,
    orderingSeq: r.ordering_seq === null ? null : Number(r.ordering_seq),
    createdAt: new Date(r.created_ms),
    event: toJobEvent(r.event),
    endpointUnknownSince: r.parked_since_ms === null ? null : new Date(r.parked_since_ms),
    skippedTurnsSince: r.skipped_since_ms === null ? null : new Date(r.skipped_since_ms),
  };
}

/** The columns an insert returns. */
export interface InsertRow {
  id: string;
  lease_token: string | null;
  lease_expires_ms: number | null;
  db_now_ms: number;
  /** Keyed inserts only: the job's number within its key (bigint, as text). */
  ordering_seq?: string | null;
}

/** A job inserted as running (claim on dispatch), as if claimed: attempt 1 spent, lease issued. */
export function toLeasedJob(j: NewJob, r: InsertRow & { lease_token: string; lease_expires_ms: number }, localNow: number): ClaimedJob {
  return {
    id: r.id,
    type: j.type,
    payload: j.payload,
    attempts: 1,
    maxAttempts: j.maxAttempts,
    leaseToken: r.lease_token,
    leaseExpiresAt: dbToLocal(r.lease_expires_ms, r.db_now_ms, localNow),
    eventId: j.eventId ?? null,
    endpoint: j.endpoint ?? null,
    orderingKey: j.orderingKey ?? null,
    orderingSeq: r.ordering_seq == null ? null : Number(r.ordering_seq),
    createdAt: new Date(r.db_now_ms),
    event: j.event?.() ?? null,
    endpointUnknownSince: null,
    skippedTurnsSince: null,
  };
}

/** A job row as written back by a transition that may end in dead (fail, reap). */
export interface TransitionRow {
  id: string;
  status: string;
  type: string;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  event_id: string | null;
  endpoint: string | null;
  /** Set by the statements that may finish a key's head (its next job then goes). */
  ordering_key?: string | null;
}

export interface ReapedRow extends TransitionRow {
  status: 'pending' | 'dead';
  locked_by: string | null;
}

export function toDead(r: TransitionRow, reason: DeadReason): DeadJob {
  return {
    id: r.id,
    type: r.type,
    payload: r.payload,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    lastError: r.last_error,
    eventId: r.event_id,
    endpoint: r.endpoint,
    orderingKey: r.ordering_key ?? null,
    reason,
  };
}

/** A job as operators see it (`jobs list|show`, `GET /v1/jobs`), and as the operator's moves return it. */
export interface JobRow {
  id: string;
  type: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  last_error: string | null;
  created_at: Date;
  completed_at: Date | null;
  topic: string | null;
  endpoint: string | null;
  event_id: string | null;
}

/** The columns of JobRow, read from the `jobs` view (every status). */
export const JOB_COLUMNS = `id, type, status, attempts, max_attempts, run_at, last_error, created_at, completed_at,
  topic, endpoint, event_id`;

/** The same, from job_history (finished jobs). */
export const HISTORY_JOB_COLUMNS = `id, type, status, attempts, max_attempts, run_at, last_error, created_at,
  case when status = 'completed' then finished_at end as completed_at, topic, endpoint, event_id`;

/**
 * The same, returned by a statement on job_queue (live jobs have no completed_at, and no topic
 * column); a job behind its ordering key's head is pending to operators.
 */
export const LIVE_JOB_COLUMNS = `id, type, case when status = 'behind' then 'pending' else status end as status, attempts, max_attempts, run_at, last_error, created_at, null::timestamptz as completed_at,
  payload->>'topic' as topic, endpoint, event_id`;

/** Which dead jobs a redrive takes (values already checked by the caller). */
export interface RedriveMatch {
  topic?: string | undefined;
  endpoint?: string | undefined;
  /** Only jobs that went dead at or after this instant. */
  since?: Date | undefined;
}

/** The where clause of a redrive on job_history, for the redrive itself and its dry run. */
export function redriveWhere(m: RedriveMatch): { where: string; values: unknown[] } {
  const where = [`status = 'dead'`];
  const values: unknown[] = [];
  if (m.topic !== undefined) {
    values.push(m.topic);
    where.push(`topic = $${values.length}`);
  }
  if (m.endpoint !== undefined) {
    values.push(m.endpoint);
    where.push(`endpoint = $${values.length}`);
  }
  if (m.since !== undefined) {
    values.push(m.since);
    where.push(`finished_at >= $${values.length}`);
  }
  return { where: where.join(' and '), values };
}
