import type pg from 'pg';
import { isValidTopic } from '../config/index.js';
import { withTransaction } from '../db/pool.js';
import { HISTORY_JOB_COLUMNS, LIVE_JOB_COLUMNS, redriveWhere, type RedriveMatch } from '../queue/job-rows.js';
import { promoteLegacyJobs, type LegacyMatch } from '../history/upgrade.js';
import { operatorCancelJob, operatorRedriveJobs, operatorRetryJob } from '../queue/transitions.js';
import { writeAudit } from './audit.js';
import { ApiError, badField } from '../errors.js';
import { HELD_COLUMNS, HELD_JOIN, toJobView, type DisabledEndpoints, type HeldColumns, type JobRow, type JobView } from './job-view.js';
import { requireText, requireUuid } from './params.js';

/**
 * The operator's moves on `jobs` (the statements are in queue/transitions.ts): each checked here,
 * in one transaction with its audit row, and a NOTIFY (sent at commit) so idle workers pick
 * re-queued jobs up at once.
 */

/**
 * Lock the job where it is: job_queue while it is live, job_history once finished (a job still in
 * the old layout's table is brought over first). A job finishing meanwhile is found in history,
 * since the live row's lock waits for that commit and then finds the row gone.
 */
async function lockJob(client: pg.ClientBase, id: string): Promise<JobRow> {
  const live = await client.query<JobRow>(`select ${LIVE_JOB_COLUMNS} from job_queue where id = $1 for update`, [id]);
  if (live.rows[0]) return live.rows[0];
  await promoteLegacyJobs(client, { where: (p) => `id = ${p(0)}`, values: [id] });
  const done = await client.query<JobRow>(`select ${HISTORY_JOB_COLUMNS} from job_history where id = $1 for update`, [id]);
  const row = done.rows[0];
  if (!row) throw new ApiError(404, 'not_found', `id: no job ${id}`, { field: 'id' });
  return row;
}

/** Dead, completed or cancelled -> pending with a fresh attempt series (redelivery on demand, or undoing a cancel). */
export async function retryJob(
  db: pg.Pool,
  id: string,
  actor: string,
  jobsChannel: string,
  disabled?: DisabledEndpoints,
): Promise<JobView> {
  const jobId = requireUuid(id, 'id');
  return withTransaction(db, async (client) => {
    const row = await lockJob(client, jobId);
    if (row.status !== 'dead' && row.status !== 'completed' && row.status !== 'cancelled') {
      throw new ApiError(409, 'invalid_state', `job ${jobId} is ${row.status}: only dead, completed or cancelled jobs can be retried`, {
        field: 'status',
        status: row.status,
      });
    }
    const upd = await operatorRetryJob(client, jobId);
    await client.query(`select pg_notify($1, '')`, [jobsChannel]);
    await writeAudit(client, {
      action: 'job.retry',
      actor,
      targetType: 'job',
      targetId: jobId,
      details: { from_status: row.status, type: row.type, topic: row.topic, endpoint: row.endpoint, event_id: row.event_id },
    });
    // Pending again: held if its endpoint holds it now.
    const held = await client.query<HeldColumns>(
      `select ${HELD_COLUMNS} from (select $1::text as endpoint, 'pending' as status) j ${HELD_JOIN}`,
      [upd.endpoint],
    );
    return toJobView({ ...upd, ...held.rows[0] }, disabled);
  });
}

/** Pending -> cancelled; a job already claimed, finished or cancelled is a 409 naming its status. */
export async function cancelJob(db: pg.Pool, id: string, actor: string, jobsChannel: string | null = null): Promise<JobView> {
  const jobId = requireUuid(id, 'id');
  return withTransaction(db, async (client) => {
    const row = await lockJob(client, jobId);
    if (row.status !== 'pending') {
      throw new ApiError(409, 'invalid_state', `job ${jobId} is ${row.status}: only pending jobs can be cancelled`, {
        field: 'status',
        status: row.status,
      });
    }
    // A cancelled head lets its key's next job go: the NOTIFY wakes a worker for it at commit.
    const upd = await operatorCancelJob(client, jobId, jobsChannel);
    await writeAudit(client, {
      action: 'job.cancel',
      actor,
      targetType: 'job',
      targetId: jobId,
      details: { type: row.type, topic: row.topic, endpoint: row.endpoint, event_id: row.event_id },
    });
    return toJobView(upd);
  });
}

export interface RedriveFilter {
  status: 'dead';
  topic?: string | undefined;
  endpoint?: string | undefined;
  /** Only jobs that went dead at or after this instant. */
  since?: Date | undefined;
  /** Count what would be re-queued; write nothing. */
  dry_run?: boolean | undefined;
}

/** Re-queue every dead job matching the filter (or count them on a dry run); one audit row for the lot. */
export async function redriveJobs(db: pg.Pool, f: RedriveFilter, actor: string, jobsChannel: string): Promise<{ count: number }> {
  if (f.status !== 'dead') throw badField('status', 'only "dead" jobs can be redriven');
  const match: RedriveMatch = {};
  const filter: Record<string, unknown> = { status: 'dead' };
  if (f.topic !== undefined) {
    if (!isValidTopic(requireText(f.topic, 'topic'))) throw badField('topic', 'expected lowercase dot-separated words');
    match.topic = f.topic;
    filter.topic = f.topic;
  }
  if (f.endpoint !== undefined) {
    match.endpoint = requireText(f.endpoint, 'endpoint');
    filter.endpoint = f.endpoint;
  }
  if (f.since !== undefined) {
    if (!(f.since instanceof Date) || Number.isNaN(f.since.getTime())) throw badField('since', 'expected a date');
    match.since = f.since;
    filter.since = f.since.toISOString();
  }
  if (f.dry_run === true) {
    await promoteLegacyJobs(db, legacyRedrive(match));
    const { where, values } = redriveWhere(match);
    const res = await db.query<{ n: number }>(`select count(*)::int as n from job_history where ${where}`, values);
    return { count: res.rows[0]?.n ?? 0 };
  }
  return withTransaction(db, async (client) => {
    await promoteLegacyJobs(client, legacyRedrive(match));
    const count = await operatorRedriveJobs(client, match);
    if (count > 0) await client.query(`select pg_notify($1, '')`, [jobsChannel]);
    await writeAudit(client, { action: 'job.redrive', actor, targetType: 'jobs', targetId: null, details: { filter, count } });
    return { count };
  });
}

/** The dead jobs of the old layout's table that a redrive matches (its columns, not job_history's). */
function legacyRedrive(m: RedriveMatch): LegacyMatch {
  const parts: Array<{ col: string; op: string; value: unknown }> = [];
  if (m.topic !== undefined) parts.push({ col: `payload->>'topic'`, op: '=', value: m.topic });
  if (m.endpoint !== undefined) parts.push({ col: 'endpoint', op: '=', value: m.endpoint });
  if (m.since !== undefined) parts.push({ col: 'updated_at', op: '>=', value: m.since });
  return {
    where: (p) => [`status = 'dead'`, ...parts.map((x, i) => `${x.col} ${x.op} ${p(i)}`)].join(' and '),
    values: parts.map((x) => x.value),
  };
}
