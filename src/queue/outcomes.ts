import type pg from 'pg';
import { withTransaction, type Queryable } from '../db/pool.js';
import type { AttemptRecord, DeadHook, DeadJob, DeadReason } from './types.js';

/**
 * What becomes of a claimed job: complete, fail (back to pending after back-off, or dead) or
 * release (back to pending, attempt unspent). Every write is guarded by id + lease_token + status
 * 'running', and the attempt rows are written in the same statement as the outcome, flagged when
 * the lease was already lost.
 */

/** The guarded identity of a claimed job. */
export interface Held {
  id: string;
  leaseToken: string;
}

interface AttemptArrays {
  values: unknown[];
  /** SQL inserting the attempt rows, flagged lease_lost where `upd` has no row for the job. */
  cte: (first: number) => string;
}

function attemptArrays(items: ReadonlyArray<{ held: Held; attempt?: AttemptRecord | undefined }>): AttemptArrays | null {
  const rows: unknown[] = [];
  for (const i of items) {
    const a = i.attempt;
    if (!a) continue;
    rows.push({
      job_id: i.held.id,
      lease_token: i.held.leaseToken,
      attempt: a.attempt,
      endpoint: a.endpoint,
      status_code: a.statusCode,
      error_kind: a.errorKind,
      error: a.error,
      duration_ms: Math.round(a.durationMs),
      response_body: a.responseBody,
      aborted: a.aborted === true,
    });
  }
  if (rows.length === 0) return null;
  // One json parameter built by one JSON.stringify: far cheaper for the worker than ten arrays
  // serialised element by element, and json (not jsonb) is parsed once by the server.
  return {
    values: [JSON.stringify(rows)],
    cte: (n) => `, att as (
      insert into webhook_attempts (job_id, lease_token, attempt, endpoint, status_code, error_kind, error, duration_ms, response_body, aborted, lease_lost)
      select a.job_id, a.lease_token, a.attempt, a.endpoint, a.status_code, a.error_kind, a.error, a.duration_ms, a.response_body, a.aborted, upd.id is null
      from json_to_recordset($${n}::json)
        as a(job_id uuid, lease_token uuid, attempt int, endpoint text, status_code int, error_kind text, error text, duration_ms int,
             response_body text, aborted boolean)
      left join upd on upd.id = a.job_id
      on conflict (job_id, lease_token) do nothing)`,
  };
}

const CLEAR_LEASE = `locked_by = null, lease_token = null, lease_expires_at = null, updated_at = now()`;

/** Complete many; returns the ids whose lease still held (the rest changed nothing). */
export async function completeJobs(
  db: Queryable,
  items: ReadonlyArray<{ held: Held; attempt?: AttemptRecord | undefined }>,
): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const att = attemptArrays(items);
  const res = await db.query<{ id: string }>({
    name: att ? 'acw_complete_att' : 'acw_complete',
    text: `with upd as (
        update jobs j set status = 'completed', completed_at = now(), last_error = null, parked_since = null, skipped_since = null, ${CLEAR_LEASE}
        from unnest($1::uuid[], $2::uuid[]) t(id, lease_token)
        where j.id = t.id and j.lease_token = t.lease_token and j.status = 'running'
        returning j.id)${att ? att.cte(3) : ''}
      select id from upd`,
    values: [items.map((i) => i.held.id), items.map((i) => i.held.leaseToken), ...(att?.values ?? [])],
  });
  return new Set(res.rows.map((r) => r.id));
}

export interface FailItem {
  held: Held;
  error: string;
  /** Dead now, whatever attempts remain. */
  dead: boolean;
  reason: DeadReason;
  delayMs: number;
  attempt?: AttemptRecord | undefined;
}

/** A job row as written back by a transition that may end in dead (fail, reaper). */
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
}

interface FailRow extends TransitionRow {
  run_at: Date;
}

export interface FailResult {
  /** Jobs whose lease still held: each with its new status. */
  changed: Map<string, { status: 'pending' | 'dead'; runAt: Date }>;
}

/**
 * Fail many: back to pending after the delay, or dead when the attempts are spent or the failure
 * is permanent. The dead hook runs in the same transaction, with only the rows this one changed.
 */
export async function failJobs(pool: pg.Pool, items: readonly FailItem[], onDead?: DeadHook): Promise<FailResult> {
  if (items.length === 0) return { changed: new Map() };
  const att = attemptArrays(items);
  const text = `with upd as (
      update jobs j set
        status = case when t.dead or j.attempts >= j.max_attempts then 'dead' else 'pending' end,
        run_at = case when t.dead or j.attempts >= j.max_attempts then j.run_at
                      else now() + t.delay * interval '1 millisecond' end,
        last_error = t.error, parked_since = null, skipped_since = null, ${CLEAR_LEASE}
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
    const res = await client.query<FailRow>({ name: att ? 'acw_fail_att' : 'acw_fail', text, values });
    const dead = res.rows.filter((r) => r.status === 'dead');
    if (dead.length > 0 && onDead) {
      await onDead(
        client,
        dead.map((r) => toDead(r, reasons.get(r.id) ?? 'max_attempts')),
      );
    }
    return {
      changed: new Map(res.rows.map((r) => [r.id, { status: r.status as 'pending' | 'dead', runAt: r.run_at }])),
    };
  });
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
    reason,
  };
}

export interface ReleaseItem {
  held: Held;
  delayMs: number;
  error?: string | null;
  /**
   * Why the endpoint could not be used: `unknown` starts the 24 h clock (`parked_since`) unless it
   * runs, `disabled` stops it; both start `skipped_since` unless it runs. Without it (a hand-back
   * at shutdown, a lost lease) both stay as they are.
   */
  park?: 'unknown' | 'disabled';
  attempt?: AttemptRecord | undefined;
}

/** Hand jobs back to pending without spending the attempt they were claimed with. */
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
