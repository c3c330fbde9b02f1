import type pg from 'pg';
import type { Logger } from '../log.js';
import type { ReapedRow } from '../queue/job-rows.js';
import { reapJobs } from '../queue/transitions.js';
import type { DeadHook } from '../queue/types.js';
import type { PeriodicRunner } from './scheduler.js';

export type { ReapedRow };

const BATCH = 1000;

/**
 * Running jobs whose lease expired (their worker crashed or hung) go back to pending, or to dead
 * when no attempt is left (the reap transition, one transaction per batch), until none is left;
 * each one logged.
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
    const rows = await reapJobs(pool, { batch: opts.batch ?? BATCH, channel: opts.channel, onDead: opts.onDead });
    for (const r of rows) {
      opts.log.warn(
        { event: 'job.reaped', job_id: r.id, type: r.type, attempt: r.attempts, status: r.status, locked_by: r.locked_by },
        r.status === 'dead' ? 'expired lease on the last attempt: job is dead' : 'expired lease: job back to pending',
      );
      if (r.status === 'dead')
        opts.log.error({ event: 'job.dead', job_id: r.id, type: r.type, attempt: r.attempts, error: r.last_error }, 'job is dead');
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
