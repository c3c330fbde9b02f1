// The moves between job_queue and job_history, as SQL fragments the statements of this folder
// share (docs/architecture.md#live-jobs-and-history): a job that finishes leaves job_queue for
// job_history in the statement that finishes it, and its earlier attempts follow it when it went dead.

/**
 * Finish: CTEs `hist`, inserting the rows of `src` (jobs just deleted from job_queue, `returning
 * j.*`) into job_history as `status` with `lastError` (SQL over `m`), in today's day partition;
 * and `tally`, counting them in job_counts for GET /v1/stats (one row per minute and connection).
 */
export const FINISH = (src: string, status: 'completed' | 'dead' | 'cancelled', lastError = 'm.last_error'): string =>
  `hist as (
    insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at, finished_at,
      event_id, endpoint, topic, series_started_at, ordering_key, ordering_seq)
    select m.id, m.type, m.payload, '${status}', m.attempts, m.max_attempts, m.run_at, ${lastError}, m.created_at, now(),
      m.event_id, m.endpoint, m.payload->>'topic', m.series_started_at, m.ordering_key, m.ordering_seq from ${src} m
    returning id, type, status, attempts, max_attempts, run_at, last_error, created_at, topic, endpoint, event_id),
  tally as (
    insert into job_counts as c (minute, slot, ${status})
    select date_bin('1 minute', now(), timestamptz 'epoch'), pg_backend_pid() % 64, count(*)::int from ${src} having count(*) > 0
    on conflict (minute, slot) do update set ${status} = c.${status} + excluded.${status})`;

/**
 * A job that went dead or was cancelled keeps its attempts as long as it is kept: the earlier ones
 * (written while it was live) move to the dead set, as far back as that set has days.
 */
export const KEEP_ATTEMPTS = (src: string): string =>
  `update job_attempts set dead = true where job_id in (select id from ${src}) and not dead
    and created_at >= (select oldest from history_bounds where set = 'job_attempts_dead')`;
