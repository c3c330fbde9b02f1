import type pg from 'pg';
import { isValidTopic } from '../config/index.js';
import { withTransaction } from '../db/pool.js';
import { writeAudit } from './audit.js';
import { AdminError, badField } from './errors.js';
import { JOB_COLUMNS, toJobView, type JobRow, type JobView } from './job-view.js';
import { requireText, requireUuid } from './params.js';

/**
 * Operator writes to `jobs`: each in one transaction with its audit row, and a NOTIFY (sent at
 * commit) so idle workers pick re-queued jobs up at once.
 */

// A new attempt series: due now, attempts reset, no lease, not parked. last_error stays as history until the next outcome.
const REQUEUE = `status = 'pending', attempts = 0, run_at = now(), completed_at = null, parked_since = null, skipped_since = null,
  locked_by = null, lease_token = null, lease_expires_at = null, updated_at = now()`;

async function lockJob(client: pg.ClientBase, id: string): Promise<JobRow> {
  const res = await client.query<JobRow>(`select ${JOB_COLUMNS} from jobs where id = $1 for update`, [id]);
  const row = res.rows[0];
  if (!row) throw new AdminError(404, 'not_found', `id: no job ${id}`, { field: 'id' });
  return row;
}

/** Dead, completed or cancelled -> pending with a fresh attempt series (redelivery on demand, or undoing a cancel). */
export async function retryJob(db: pg.Pool, id: string, actor: string, jobsChannel: string): Promise<JobView> {
  const jobId = requireUuid(id, 'id');
  return withTransaction(db, async (client) => {
    const row = await lockJob(client, jobId);
    if (row.status !== 'dead' && row.status !== 'completed' && row.status !== 'cancelled') {
      throw new AdminError(409, 'invalid_state', `job ${jobId} is ${row.status}: only dead, completed or cancelled jobs can be retried`, {
        field: 'status',
        status: row.status,
      });
    }
    const upd = await client.query<JobRow>(`update jobs set ${REQUEUE} where id = $1 returning ${JOB_COLUMNS}`, [jobId]);
    await client.query(`select pg_notify($1, '')`, [jobsChannel]);
    await writeAudit(client, {
      action: 'job.retry',
      actor,
      targetType: 'job',
      targetId: jobId,
      details: { from_status: row.status, type: row.type, topic: row.topic, endpoint: row.endpoint, event_id: row.event_id },
    });
    return toJobView(upd.rows[0]!);
  });
}

/** Pending -> cancelled; a job already claimed, finished or cancelled is a 409 naming its status. */
export async function cancelJob(db: pg.Pool, id: string, actor: string): Promise<JobView> {
  const jobId = requireUuid(id, 'id');
  return withTransaction(db, async (client) => {
    const row = await lockJob(client, jobId);
    if (row.status !== 'pending') {
      throw new AdminError(409, 'invalid_state', `job ${jobId} is ${row.status}: only pending jobs can be cancelled`, {
        field: 'status',
        status: row.status,
      });
    }
    const upd = await client.query<JobRow>(
      `update jobs set status = 'cancelled', parked_since = null, skipped_since = null, updated_at = now() where id = $1 returning ${JOB_COLUMNS}`,
      [jobId],
    );
    await writeAudit(client, {
      action: 'job.cancel',
      actor,
      targetType: 'job',
      targetId: jobId,
      details: { type: row.type, topic: row.topic, endpoint: row.endpoint, event_id: row.event_id },
    });
    return toJobView(upd.rows[0]!);
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
  const where = [`status = 'dead'`];
  const values: unknown[] = [];
  const filter: Record<string, unknown> = { status: 'dead' };
  if (f.topic !== undefined) {
    if (!isValidTopic(requireText(f.topic, 'topic'))) throw badField('topic', 'expected lowercase dot-separated words');
    values.push(f.topic);
    where.push(`payload->>'topic' = $${values.length}`);
    filter.topic = f.topic;
  }
  if (f.endpoint !== undefined) {
    values.push(requireText(f.endpoint, 'endpoint'));
    where.push(`endpoint = $${values.length}`);
    filter.endpoint = f.endpoint;
  }
  if (f.since !== undefined) {
    if (!(f.since instanceof Date) || Number.isNaN(f.since.getTime())) throw badField('since', 'expected a date');
    values.push(f.since);
    where.push(`updated_at >= $${values.length}`);
    filter.since = f.since.toISOString();
  }
  if (f.dry_run === true) {
    const res = await db.query<{ n: number }>(`select count(*)::int as n from jobs where ${where.join(' and ')}`, values);
    return { count: res.rows[0]?.n ?? 0 };
  }
  return withTransaction(db, async (client) => {
    // SKIP LOCKED: a dead job the purge is deleting right now is simply not redriven.
    const res = await client.query<{ n: number }>(
      `with v as (select id from jobs where ${where.join(' and ')} for update skip locked),
       upd as (update jobs j set ${REQUEUE} from v where j.id = v.id returning 1)
       select count(*)::int as n from upd`,
      values,
    );
    const count = res.rows[0]?.n ?? 0;
    if (count > 0) await client.query(`select pg_notify($1, '')`, [jobsChannel]);
    await writeAudit(client, { action: 'job.redrive', actor, targetType: 'jobs', targetId: null, details: { filter, count } });
    return { count };
  });
}
