import type { Queryable } from '../db/pool.js';
import {
  HELD_COLUMNS,
  HELD_JOIN,
  JOB_COLUMNS,
  placeAttempts,
  requireStatus,
  toJobView,
  type AttemptRow,
  type DisabledEndpoints,
  type AttemptView,
  type HeldColumns,
  type JobFilter,
  type JobRow,
  type JobView,
} from './job-view.js';
import { decodeCursor, encodeCursor, requireLimit, requireText, requireUuid } from './params.js';
import { JOB_EVENT, toJobEvent } from '../queue/job-rows.js';
import { eventBody } from '../webhook/job.js';

/** Operator reads of `jobs` (`GET /v1/jobs`, `jobs list|show`). Writes: job-actions.ts, queue/transitions.ts. */
export { cancelJob, redriveJobs, retryJob, type RedriveFilter } from './job-actions.js';
export { JOB_STATUSES, type AttemptView, type DisabledEndpoints, type JobFilter, type JobView } from './job-view.js';

// The cursor carries created_at in whole microseconds (PostgreSQL's precision; a JS Date would lose it) and the id.
const CURSOR_SHAPE = [/^\d{1,16}$/, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/];

/** Newest first (created_at desc, id desc) with a keyset cursor, so paging stays cheap and stable under inserts. */
export async function listJobs(
  db: Queryable,
  f: JobFilter = {},
  disabled?: DisabledEndpoints,
): Promise<{ items: JobView[]; next_cursor: string | null }> {
  const limit = requireLimit(f.limit, 'limit', 50, 500);
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (clause: (p: string) => string, v: unknown): void => {
    values.push(v);
    where.push(clause(`$${values.length}`));
  };
  if (f.status !== undefined) add((p) => `status = ${p}`, requireStatus(f.status));
  if (f.type !== undefined) add((p) => `type = ${p}`, requireText(f.type, 'type'));
  if (f.topic !== undefined) add((p) => `topic = ${p}`, requireText(f.topic, 'topic'));
  if (f.endpoint !== undefined) add((p) => `endpoint = ${p}`, requireText(f.endpoint, 'endpoint'));
  if (f.event_id !== undefined) add((p) => `event_id = ${p}::uuid`, requireUuid(f.event_id, 'event_id'));
  if (f.created_after !== undefined) add((p) => `created_at >= ${p}`, f.created_after);
  if (f.created_before !== undefined) add((p) => `created_at < ${p}`, f.created_before);
  if (f.cursor !== undefined) {
    const [us, id] = decodeCursor(f.cursor, CURSOR_SHAPE);
    values.push(us, id);
    const n = values.length;
    where.push(`(created_at, id) < (timestamptz 'epoch' + $${n - 1}::bigint * interval '1 microsecond', $${n}::uuid)`);
  }
  values.push(limit + 1);
  // The page first, then its endpoints' state joined to it: the held lookup costs one key read per row of the page.
  const res = await db.query<JobRow & HeldColumns & { created_us: string }>(
    `select j.*, ${HELD_COLUMNS} from (
       select ${JOB_COLUMNS}, (extract(epoch from created_at) * 1000000)::bigint as created_us
       from jobs ${where.length > 0 ? `where ${where.join(' and ')}` : ''}
       order by created_at desc, id desc limit $${values.length}) j
     ${HELD_JOIN}
     order by j.created_at desc, j.id desc`,
    values,
  );
  const rows = res.rows.slice(0, limit);
  const last = rows.at(-1);
  return {
    items: rows.map((r) => toJobView(r, disabled)),
    next_cursor: res.rows.length > limit && last ? encodeCursor([last.created_us, last.id]) : null,
  };
}

/**
 * One job with its payload and its HTTP attempts, oldest first; null when there is no such job. The
 * payload shows the body the job sends, also when it is made from the job's event.
 */
export async function getJob(
  db: Queryable,
  id: string,
  disabled?: DisabledEndpoints,
): Promise<(JobView & { payload: unknown; deliveries: AttemptView[] }) | null> {
  const jobId = requireUuid(id, 'id');
  const job = await db.query<JobRow & HeldColumns & { payload: unknown; event: { data: unknown; ms: number } | null }>(
    `select j.*, ${HELD_COLUMNS} from (select ${JOB_COLUMNS}, payload, ${JOB_EVENT} as event from jobs j where id = $1) j ${HELD_JOIN}`,
    [jobId],
  );
  const row = job.rows[0];
  if (!row) return null;
  // A job of an event sends the body made from it: shown as if the payload carried it.
  const event = toJobEvent(row.event);
  const p = row.payload as { topic?: unknown; body?: unknown } | null;
  if (event && row.event_id && p && typeof p.topic === 'string' && p.body === undefined)
    row.payload = { ...p, body: eventBody(row.event_id, p.topic, event) };
  const att = await db.query<AttemptRow>(
    `select attempt, status_code, error_kind, error, duration_ms, response_body, lease_lost, aborted, created_at, probe
     from webhook_attempts where job_id = $1 order by created_at, id`,
    [jobId],
  );
  return { ...toJobView(row, disabled), payload: row.payload, deliveries: placeAttempts(att.rows) };
}
