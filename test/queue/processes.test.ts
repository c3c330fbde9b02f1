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
  // Four processes start under whatever load the machine has: their start-up and the drain get
  // generous hang guards; what is asserted is who ran what, and how often.
  it('four worker processes drain 5,000 jobs, each completed exactly once', async () => {
    const ws = Array.from({ length: 4 }, () => worker({ CONCURRENCY: '16' }));
    await Promise.all(ws.map((w) => w.waitForLine(/"ready"/, 60_000)));
    for (let i = 0; i < 5; i++) {
      await enqueueJobs(
        db.pool,
        Array.from({ length: 1_000 }, (_, n) => ({ type: 'test.record', payload: { n: i * 1000 + n }, maxAttempts: 3 })),
        CH,
      );
    }
    await waitFor(
      async () => (await db.pool.query(`select count(*)::int as n from jobs where status = 'completed'`)).rows[0].n === 5_000,
      120_000,
      100,
    );
    const runs = await db.pool.query(
      `select count(*)::int as n, count(distinct job_id)::int as d, count(distinct worker)::int as w from test_runs`,
    );
    expect(runs.rows[0]).toEqual({ n: 5_000, d: 5_000, w: 4 });
    const att = await db.pool.query(`select max(attempts)::int as m from jobs`);
    expect(att.rows[0].m).toBe(1);
    expect(await Promise.all(ws.map((w) => w.stop()))).toEqual([0, 0, 0, 0]);
  }, 240_000);

  it('kill -9 mid-job: the reaper rescues it on its first turn after the lease expired, and another worker completes it', async () => {
    // A lease long enough that a live, renewing worker cannot lose it to the reaper, however slow
    // the machine: the reaper (in the rescuer, up before the kill) may only take it once a is gone.
    const a = worker({ LEASE_MS: '3000' });
    await a.waitForLine(/"ready"/, 60_000);
    const [id] = await enqueueJobs(db.pool, [{ type: 'test.hang_first', payload: {}, maxAttempts: 3 }], CH);
    await waitFor(async () => (await db.pool.query('select 1 from test_runs')).rowCount === 1, 60_000);
    const b = worker({ REAPER_MS: '500' });
    await b.waitForLine(/"ready"/, 60_000);
    await a.stop('SIGKILL');
    // Once a's connections are gone, nobody renews the lease: it ends at the expiry the database
    // holds (a renewal sent just before the kill has been applied by then).
    const appName = `queue-worker ${a.pid}`;
    await waitFor(
      async () => (await db.pool.query('select 1 from pg_stat_activity where application_name = $1', [appName])).rowCount === 0,
      60_000,
    );
    const { expires, status } = (await db.pool.query(`select lease_expires_at as expires, status from jobs where id = $1`, [id])).rows[0];
    expect(status).toBe('running');
    await waitFor(
      async () => (await db.pool.query(`select status from jobs where id = $1`, [id])).rows[0].status === 'completed',
      60_000,
      50,
    );
    // Every turn of the reaper, with the database's time as it began. The job is reaped at once
    // (one turn, one job), never before its lease ran out (the reap sets run_at, the database's
    // time), and on the first turn after that: no turn that began past the expiry left it there.
    // Turns come one reaper interval apart (test/runners/reaper-cadence.test.ts, on a fake clock), so
    // the rescue comes within lease_timeout + one interval of the last renewal, timing nothing here.
    const turns = () => b.lines.filter((l) => l.includes('"test.reaper_turn"')).map((l) => JSON.parse(l) as { at: string; reaped: number });
    await waitFor(() => turns().some((t) => t.reaped > 0), 60_000);
    const all = turns();
    const k = all.findIndex((t) => t.reaped > 0);
    expect(all.map((t) => t.reaped).filter((n) => n > 0)).toEqual([1]);
    const late = all.slice(0, k).filter((t) => new Date(t.at).getTime() >= (expires as Date).getTime());
    expect(late, 'reaper turns after the expiry that left the job running').toEqual([]);
    const reapedAt = (await db.pool.query(`select run_at from jobs where id = $1`, [id])).rows[0].run_at as Date;
    expect(reapedAt.getTime()).toBeGreaterThanOrEqual((expires as Date).getTime());
    const runs = (await db.pool.query('select worker from test_runs order by at')).rows.map((r) => r.worker);
    expect(runs).toEqual([String(a.pid), String(b.pid)]);
    expect((await db.pool.query('select attempts from jobs')).rows[0].attempts).toBe(2);
    expect(b.lines.filter((l) => l.includes('"job.reaped"'))).toHaveLength(1);
  }, 240_000);

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
