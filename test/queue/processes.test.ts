import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';

const WORKER = fileURLToPath(new URL('../helpers/queue-worker.mjs', import.meta.url));
const CH = 'public.acw_jobs';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query('create table test_runs (job_id uuid not null, worker text not null, at timestamptz default clock_timestamp())');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, test_runs');
});
const procs: Proc[] = [];
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
});

function worker(env: Record<string, string> = {}): Proc {
  const p = startProc(process.execPath, [WORKER], { DB_URL: db.url, ...env });
  procs.push(p);
  return p;
}

describe('worker processes', () => {
  it('four worker processes drain 5,000 jobs, each completed exactly once', async () => {
    const ws = Array.from({ length: 4 }, () => worker({ CONCURRENCY: '16' }));
    await Promise.all(ws.map((w) => w.waitForLine(/"ready"/)));
    for (let i = 0; i < 5; i++) {
      await enqueueJobs(
        db.pool,
        Array.from({ length: 1_000 }, (_, n) => ({ type: 'test.record', payload: { n: i * 1000 + n }, maxAttempts: 3 })),
        CH,
      );
    }
    await waitFor(
      async () => (await db.pool.query(`select count(*)::int as n from jobs where status = 'completed'`)).rows[0].n === 5_000,
      60_000,
      100,
    );
    const runs = await db.pool.query(
      `select count(*)::int as n, count(distinct job_id)::int as d, count(distinct worker)::int as w from test_runs`,
    );
    expect(runs.rows[0]).toEqual({ n: 5_000, d: 5_000, w: 4 });
    const att = await db.pool.query(`select max(attempts)::int as m from jobs`);
    expect(att.rows[0].m).toBe(1);
    expect(await Promise.all(ws.map((w) => w.stop()))).toEqual([0, 0, 0, 0]);
  });

  it('kill -9 mid-job: the reaper rescues it within lease_timeout + one reaper interval and another worker completes it', async () => {
    const a = worker({ LEASE_MS: '1500' });
    await a.waitForLine(/"ready"/);
    const [id] = await enqueueJobs(db.pool, [{ type: 'test.sleep', payload: { ms: 3_000 }, maxAttempts: 3 }], CH);
    await waitFor(async () => (await db.pool.query('select 1 from test_runs')).rowCount === 1);
    // The rescuer is up before the kill, so its start-up time is not part of what is measured.
    const b = worker({ LEASE_MS: '1500', REAPER_MS: '500' });
    await b.waitForLine(/"ready"/);
    await a.stop('SIGKILL');
    // Nobody renews the lease now: it ends at the expiry the database holds.
    const { expires, status } = (await db.pool.query(`select lease_expires_at as expires, status from jobs where id = $1`, [id])).rows[0];
    expect(status).toBe('running');
    await waitFor(
      async () => (await db.pool.query(`select status from jobs where id = $1`, [id])).rows[0].status === 'completed',
      30_000,
      50,
    );
    // Picked up again no later than the lease's expiry plus one reaper interval (500 ms) plus a
    // second for the claim; both times are the database's clock.
    const rescued = (await db.pool.query(`select at from test_runs where worker = $1`, [String(b.pid)])).rows[0].at as Date;
    expect(rescued.getTime() - (expires as Date).getTime()).toBeLessThan(500 + 1_000);
    const runs = (await db.pool.query('select worker from test_runs order by at')).rows.map((r) => r.worker);
    expect(runs).toEqual([String(a.pid), String(b.pid)]);
    expect((await db.pool.query('select attempts from jobs')).rows[0].attempts).toBe(2);
    expect(b.lines.some((l) => l.includes('"job.reaped"'))).toBe(true);
  });

  it('SIGTERM during long jobs: the process exits 0 and leaves no job running', async () => {
    const a = worker({ GRACE_MS: '300' });
    await a.waitForLine(/"ready"/);
    await enqueueJobs(
      db.pool,
      Array.from({ length: 4 }, () => ({ type: 'test.sleep', payload: { ms: 60_000 }, maxAttempts: 3 })),
      CH,
    );
    await waitFor(async () => (await db.pool.query(`select count(*)::int as n from jobs where status = 'running'`)).rows[0].n === 4);
    expect(await a.stop('SIGTERM')).toBe(0);
    const rows = (await db.pool.query(`select status, attempts from jobs`)).rows;
    expect(rows).toEqual(Array.from({ length: 4 }, () => ({ status: 'pending', attempts: 0 })));
    expect(a.lines.some((l) => l.includes('"jobs.module.shutdown_timeout"'))).toBe(true);
  });
});
