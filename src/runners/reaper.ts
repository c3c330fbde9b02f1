import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import type { Logger } from '../log.js';
import { toDead, type TransitionRow } from '../queue/outcomes.js';
import type { DeadHook } from '../queue/types.js';
import type { PeriodicRunner } from './scheduler.js';

const BATCH = 1000;

export interface ReapedRow extends TransitionRow {
  status: 'pending' | 'dead';
  locked_by: string | null;
}

/**
 * Running jobs whose lease expired (their worker crashed or hung) go back to pending, or to dead
 * when no attempt is left, with the dead hook in the same transaction. Reads only the partial
 * index on running jobs.
 */
export async function reapExpiredJobs(
  pool: pg.Pool,
  opts: {
    channel: string;
    onDead?: DeadHook | undefined;
    log: Logger;
    batch?: number;
    /** Metrics hook: the jobs each batch moved. */
    onReaped?: ((rows: readonly ReapedRow[]) => void) | undefined;
  },
): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await withTransaction(pool, async (client) => {
      const res = await client.query<ReapedRow>(
        `with expired as (
           select id, locked_by from jobs where status = 'running' and lease_expires_at < now()
           order by lease_expires_at limit $1 for update skip locked),
         upd as (
           update jobs j set
             status = case when j.attempts >= j.max_attempts then 'dead' else 'pending' end,
             run_at = now(),
             last_error = 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped renewing it',
             locked_by = null, lease_token = null, lease_expires_at = null, updated_at = now()
           from expired e where j.id = e.id
           returning j.id, j.status, j.type, j.payload, j.attempts, j.max_attempts, j.last_error, j.event_id, j.endpoint, e.locked_by)
         select upd.*, (select pg_notify($2, '') where exists (select 1 from upd where status = 'pending')) as n from upd`,
        [opts.batch ?? BATCH, opts.channel],
      );
      const dead = res.rows.filter((r) => r.status === 'dead');
      if (dead.length > 0 && opts.onDead) await opts.onDead(client, dead.map((r) => toDead(r, 'reaped')));
      return res.rows;
    });
    for (const r of rows) {
      opts.log.warn(
        { event: 'job.reaped', job_id: r.id, type: r.type, attempt: r.attempts, status: r.status, locked_by: r.locked_by },
        r.status === 'dead' ? 'expired lease on the last attempt: job is dead' : 'expired lease: job back to pending',
      );
      if (r.status === 'dead') opts.log.error({ event: 'job.dead', job_id: r.id, type: r.type, attempt: r.attempts, error: r.last_error }, 'job is dead');
    }
    if (rows.length > 0) opts.onReaped?.(rows);
    total += rows.length;
    if (rows.length < (opts.batch ?? BATCH)) return total;
  }
}

export function jobReaper(opts: {
  intervalMs: number;
  channel: string;
  onDead?: DeadHook | undefined;
  /** Metrics hook: the jobs each reap moved. */
  onReaped?: ((rows: readonly ReapedRow[]) => void) | undefined;
}): PeriodicRunner {
  return {
    name: 'job_reaper',
    intervalMs: opts.intervalMs,
    cluster: true,
    run: async ({ pool, log }) => {
      await reapExpiredJobs(pool, { channel: opts.channel, onDead: opts.onDead, log, onReaped: opts.onReaped });
    },
  };
}
