import type { Queryable } from '../../db/pool.js';
import { CLEAR_LEASE, JOB_COLUMNS, NOT_SKIPPED, redriveWhere, type JobRow, type RedriveMatch } from '../job-rows.js';

// The operator's moves (admin/job-actions.ts checks the state, locks, audits and notifies), an
// endpoint's force-delete and replay (the module's rules: ../transitions.ts).

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
