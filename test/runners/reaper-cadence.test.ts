// The reaper's cadence on a fake clock: "rescued within lease_timeout + one reaper interval" is
// this (every interval, a turn) with the first-turn-after-expiry check of
// test/queue/processes.test.ts, which reads the turns of a real reaper from the database's times.
import type pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jobReaper } from '../../src/runners/reaper.js';
import { Scheduler } from '../../src/runners/scheduler.js';

afterEach(() => {
  vi.useRealTimers();
});

/**
 * The database's side of a cluster runner's turn (claimRunnerTurn), on the fake clock: its
 * `update runner_state … where last_run_at <= now() - (interval - slack)`, for one replica.
 */
function turnTable(): { pool: pg.Pool; asked: number[] } {
  let last = Number.NEGATIVE_INFINITY;
  const asked: number[] = [];
  const query = async (q: { name?: string; values?: unknown[] }) => {
    if (q.name !== 'acw_runner_claim') return { rowCount: 0, rows: [] };
    const [, intervalMs, slackMs] = q.values as [string, number, number];
    asked.push(Date.now());
    if (Date.now() - last < intervalMs - slackMs) return { rowCount: 0, rows: [] };
    last = Date.now();
    return { rowCount: 1, rows: [{ name: q.values?.[0] }] };
  };
  return { pool: { query } as unknown as pg.Pool, asked };
}

describe('the reaper, scheduled', () => {
  it('takes a turn every reaper interval, asking four times per interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { pool, asked } = turnTable();
    const turns: number[] = [];
    const reaper = jobReaper({ intervalMs: 500, channel: 'public.acw_jobs' });
    const scheduler = new Scheduler({ pool }).register({ ...reaper, run: async () => void turns.push(Date.now()) });
    const start = Date.now();
    scheduler.start();
    await vi.advanceTimersByTimeAsync(5_000);
    await scheduler.stop();
    expect(reaper).toMatchObject({ name: 'job_reaper', cluster: true, intervalMs: 500 });
    expect(turns.map((t) => t - start)).toEqual(Array.from({ length: 11 }, (_, i) => i * 500));
    expect(asked.length).toBe(41);
  });
});
