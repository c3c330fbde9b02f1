import type { Queryable } from '../../db/pool.js';
import { LIVE_JOB_COLUMNS, redriveWhere, type JobRow, type RedriveMatch } from '../job-rows.js';
import { FINISH, KEEP_ATTEMPTS } from './history-moves.js';
import { advanceKeys, requeueKeyed } from './ordering.js';
import { keyedFinished } from './sweeps.js';

// The operator's moves (admin/job-actions.ts checks the state, locks, audits and notifies), an
// endpoint's force-delete and replay (the module's rules: ../transitions.ts). A job taken back
// from history leaves job_history for job_queue in the statement that requeues it, id kept.

/**
 * A new attempt series for the rows of `src` (just deleted from job_history, `returning h.*`): due
 * now, attempts reset, no lease, not parked, and its age (notify.webhook.max_age) counted from
 * now. last_error stays as history until the next outcome.
 */
const REQUEUE = (src: string): string =>
  `insert into job_queue (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at, updated_at,
    event_id, endpoint, series_started_at, ordering_key, ordering_seq)
  select m.id, m.type, m.payload, 'pending', 0, m.max_attempts, now(), m.last_error, m.created_at, now(),
    m.event_id, m.endpoint, now(), m.ordering_key, m.ordering_seq from ${src} m`;

/**
 * Take the history rows `pick` names (a select of `id, finished_at` from job_history, locked, SKIP
 * LOCKED where many) back into job_queue; `out` is a select over `ins` (the new live rows).
 */
const FROM_HISTORY = (pick: string, out: string): string => `with v as (${pick}),
    moved as (delete from job_history h using v where h.id = v.id and h.finished_at = v.finished_at returning h.*),
    ins as (${REQUEUE('moved')} returning *)
  ${out}`;

/** Operator retry: dead, completed or cancelled -> pending with a fresh attempt series. The caller holds the row lock. */
export async function operatorRetryJob(client: Queryable, id: string): Promise<JobRow> {
  const res = await client.query<JobRow>(
    FROM_HISTORY(`select id, finished_at from job_history where id = $1`, `select ${LIVE_JOB_COLUMNS} from ins`),
    [id],
  );
  // A keyed job joins its key's queue (at its head when the key has none, or it was the key's blocked head).
  await requeueKeyed(client, [id]);
  return res.rows[0]!;
}

/** Operator cancel: pending -> cancelled (into job_history). The caller holds the row lock. */
export async function operatorCancelJob(client: Queryable, id: string, channel: string | null = null): Promise<JobRow> {
  const res = await client.query<JobRow & { ordering_key: string | null }>(
    `with moved as (delete from job_queue j where j.id = $1 returning j.*),
       ${FINISH('moved', 'cancelled')},
       kept as (${KEEP_ATTEMPTS('moved')})
     select id, type, status, attempts, max_attempts, run_at, last_error, created_at, null::timestamptz as completed_at, topic, endpoint, event_id,
       (select ordering_key from moved) as ordering_key
     from hist`,
    [id],
  );
  const { ordering_key, ...row } = res.rows[0]!;
  // A cancelled head lets its key's next job go.
  await advanceKeys(client, keyedFinished([{ ...row, ordering_key, dead: false }]), channel);
  return row;
}

/**
 * Operator force-delete of an endpoint: every pending job of it -> cancelled (running ones finish;
 * their retries find the endpoint gone). Reads the endpoint's range of the due index. Returns how many.
 */
export async function cancelEndpointJobs(client: Queryable, endpoint: string): Promise<number> {
  const res = await client.query<{ n: number }>(
    `with moved as (delete from job_queue j where j.status in ('pending', 'behind') and j.endpoint = $1 returning j.*),
       ${FINISH('moved', 'cancelled', `'endpoint deleted'`)},
       kept as (${KEEP_ATTEMPTS('moved')}),
       -- Its keys go with it (a running head that finishes later finds no key to move on).
       keys as (delete from ordering_keys where endpoint = $1)
     select count(*)::int as n from moved`,
    [endpoint],
  );
  return res.rows[0]?.n ?? 0;
}

/** Operator redrive: every dead job matching -> pending with a fresh attempt series. Returns how many. */
export async function operatorRedriveJobs(client: Queryable, m: RedriveMatch): Promise<number> {
  const { where, values } = redriveWhere(m);
  // SKIP LOCKED: a dead job another move holds right now is simply not redriven.
  const res = await client.query<{ n: number; keyed: string[] | null }>(
    FROM_HISTORY(
      `select id, finished_at from job_history where ${where} for update skip locked`,
      `select count(*)::int as n, array_agg(id) filter (where ordering_key is not null) as keyed from ins`,
    ),
    values,
  );
  await requeueKeyed(client, res.rows[0]?.keyed ?? []);
  return res.rows[0]?.n ?? 0;
}

/**
 * Replay (operator, docs/operations.md#replaying-an-endpoint): this endpoint's jobs made in
 * [since, until) whose status is listed -> pending with a fresh attempt series, ids kept (the
 * `X-ACW-Event-Id` receivers deduplicate on). Only dead and completed jobs move, whatever the
 * caller lists: a pending job is queued already, a running one belongs to its worker, a cancelled
 * one was stopped on purpose. Reads the endpoint's range of job_history's (endpoint, created_at,
 * id) index in each day. Returns how many moved. The jobs a replay makes for events that had none
 * go through insertJobs.
 */
export async function replayJobs(
  client: Queryable,
  m: { endpoint: string; since: Date; until: Date; statuses: readonly string[] },
): Promise<number> {
  const res = await client.query<{ n: number; keyed: string[] | null }>(
    FROM_HISTORY(
      `select id, finished_at from job_history
         where endpoint = $1 and created_at >= $2 and created_at < $3 and status = any($4::text[]) and status in ('dead', 'completed')
         for update skip locked`,
      `select count(*)::int as n, array_agg(id) filter (where ordering_key is not null) as keyed from ins`,
    ),
    [m.endpoint, m.since, m.until, m.statuses],
  );
  // Keyed jobs join their keys' queues in sequence order: the window is sent in order per key.
  await requeueKeyed(client, res.rows[0]?.keyed ?? []);
  return res.rows[0]?.n ?? 0;
}
