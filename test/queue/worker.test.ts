import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors.js';
import { createPool } from '../../src/db/pool.js';
import { enqueueJobs } from '../../src/queue/transitions.js';
import type { DeadJob } from '../../src/queue/types.js';
import { WorkerPool, type JobHandler, type WorkerPoolOptions } from '../../src/queue/worker.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { startProxy } from '../helpers/proxy.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, job_counts, job_attempts, delivery_stats');
});
const pools: WorkerPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.stop()));
});

const CH = 'public.acw_jobs';
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), reject(new Error('aborted'))), { once: true });
  });

function startPool(handlers: Record<string, JobHandler>, over: Partial<WorkerPoolOptions> = {}) {
  const logs = captureLogs();
  const wp = new WorkerPool({
    pool: db.pool,
    url: db.url,
    channel: CH,
    handlers,
    concurrency: 8,
    leaseMs: 30_000,
    // Long poll: anything that happens sooner was woken by NOTIFY or the due timer.
    pollMs: 60_000,
    shutdownGraceMs: 2_000,
    retry: { base: 20, max: 200, jitter: 0 },
    log: logs.log,
    ...over,
  });
  pools.push(wp);
  return { wp, ...logs };
}

const statuses = async () =>
  (await db.pool.query<{ status: string; n: number }>('select status, count(*)::int as n from jobs group by 1')).rows.reduce<
    Record<string, number>
  >((a, r) => ({ ...a, [r.status]: r.n }), {});

describe('worker pool', () => {
  it('with a delivery budget beside jobs.workers, a backlog of application jobs is claimed batch after batch, not one batch per poll', async () => {
    // Queued before the pool starts: no NOTIFY comes for them, and the poll (60 s) would take
    // minutes for 25 batches of 4. Each claim fills jobs.workers while the claim as a whole is short.
    await enqueueJobs(
      db.pool,
      Array.from({ length: 100 }, () => ({ type: 'app', payload: {}, maxAttempts: 1 })),
      CH,
    );
    const { wp } = startPool(
      { app: async () => undefined },
      { concurrency: 4, deliveries: 50, endpointLimits: () => new Map([['hooks', 8]]) },
    );
    await wp.start();
    await waitFor(async () => ((await statuses()).completed === 100 ? true : null), 20_000);
    expect(await statuses()).toEqual({ completed: 100 });
  });

  it('wakes on NOTIFY the moment work is enqueued and completes it', async () => {
    const seen: string[] = [];
    const { wp } = startPool({ t: async (j) => void seen.push(j.id) });
    await wp.start();
    const ids = await enqueueJobs(
      db.pool,
      Array.from({ length: 50 }, () => ({ type: 't', payload: {}, maxAttempts: 3 })),
      CH,
    );
    await waitFor(async () => (await statuses()).completed === 50, 5_000);
    expect(seen.toSorted()).toEqual(ids.toSorted());
  });

  it('sets a timer for a future run_at instead of waiting for the poll', async () => {
    const { wp } = startPool({ t: async () => undefined });
    await wp.start();
    await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3, delayMs: 300 }], CH);
    expect((await statuses()).pending).toBe(1);
    await waitFor(async () => (await statuses()).completed === 1, 5_000);
  });

  it('retries with back-off (a retry coming due needs no NOTIFY) and completes', async () => {
    let calls = 0;
    const { wp, events } = startPool({
      t: async () => {
        calls++;
        if (calls < 3) throw new Error(`transient ${calls}`);
      },
    });
    await wp.start();
    await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 5 }], CH);
    await waitFor(async () => (await statuses()).completed === 1, 5_000);
    expect(calls).toBe(3);
    expect(events('job.fail_retry').map((l) => l.error)).toEqual(['transient 1', 'transient 2']);
    expect((await db.pool.query('select attempts from jobs')).rows[0].attempts).toBe(3);
  });

  it('PermanentError and exhausted attempts both go dead with the hook fired once each', async () => {
    const dead: DeadJob[] = [];
    const { wp, events } = startPool(
      {
        perm: async () => {
          throw new PermanentError('no point retrying');
        },
        flaky: async () => {
          throw new Error('still failing');
        },
      },
      { onDead: async (_c, jobs) => void dead.push(...jobs) },
    );
    await wp.start();
    await enqueueJobs(
      db.pool,
      [
        { type: 'perm', payload: {}, maxAttempts: 5 },
        { type: 'flaky', payload: {}, maxAttempts: 3 },
      ],
      CH,
    );
    await waitFor(async () => (await statuses()).dead === 2, 5_000);
    expect(dead.map((d) => `${d.type}:${d.reason}:${d.attempts}`).toSorted()).toEqual(['flaky:max_attempts:3', 'perm:permanent:1']);
    expect(events('job.dead')).toHaveLength(2);
    expect(events('job.fail_retry')).toHaveLength(2);
  });

  it('a job whose lease was taken over is aborted and commits nothing', async () => {
    let aborted = false;
    const { wp, events } = startPool(
      {
        t: async (_j, { signal }) => {
          await sleep(5_000, signal).catch(() => (aborted = true));
        },
      },
      { leaseMs: 600 },
    );
    await wp.start();
    const [id] = await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
    await waitFor(async () => (await statuses()).running === 1);
    // Another worker took the job over (as after a reap and a re-claim).
    await db.pool.query(`update jobs set lease_token = gen_random_uuid(), locked_by = 'other' where id = $1`, [id]);
    await waitFor(() => aborted, 5_000);
    await waitFor(() => events('job.lease_lost').length >= 1);
    await wp.stop();
    const row = (await db.pool.query('select status, locked_by from jobs')).rows[0];
    expect(row).toEqual({ status: 'running', locked_by: 'other' });
  });

  it('a database blip shorter than the lease loses no lease', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    const pool = createPool({ url: pu.toString(), size: 4, schema: 'public' });
    try {
      // The job runs until the blip is over; the blip lasts until a renewal has failed in it. The
      // lease (renewed every 2 s) is long enough that no load makes that outlast it.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const { wp, events } = startPool({ t: async () => gate }, { pool, url: pu.toString(), leaseMs: 6_000 });
      await wp.start();
      await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
      await waitFor(async () => (await statuses()).running === 1, 20_000);
      proxy.down();
      await waitFor(() => events('job.heartbeat_error').length > 0, 20_000);
      proxy.up();
      release();
      await waitFor(async () => (await statuses()).completed === 1, 20_000);
      expect(events('job.lease_lost').map((l) => l.why)).toEqual([]);
      expect((await db.pool.query('select attempts from jobs')).rows[0].attempts).toBe(1);
      await wp.stop();
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('a database outage longer than the lease loses the lease during the outage, and the attempt is handed back unspent', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    const pool = createPool({ url: pu.toString(), size: 4, schema: 'public' });
    try {
      let aborted = false;
      const { wp, events } = startPool(
        {
          t: async (_j, { signal }) =>
            sleep(60_000, signal).catch((err: unknown) => {
              aborted = true;
              throw err;
            }),
        },
        { pool, url: pu.toString(), leaseMs: 1_000 },
      );
      await wp.start();
      await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
      await waitFor(async () => (await statuses()).running === 1);
      // Down until the job is aborted: the lease must be judged lost while the database is still
      // away (a renewal after it comes back would otherwise still match the row and revive the lease).
      proxy.down();
      await waitFor(() => aborted, 25_000);
      expect(events('job.lease_lost').map((l) => l.why)).toEqual(['lease expired while the database was unreachable']);
      proxy.up();
      await wp.stop();
      // Cut short by the lost lease, the attempt is handed back unspent, not failed.
      expect((await db.pool.query('select status, attempts from jobs')).rows).toEqual([{ status: 'pending', attempts: 0 }]);
      expect(events('job.fail_retry')).toEqual([]);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('an outcome write that fails (database away) is logged as job.write_error and written once it is back', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    const pool = createPool({ url: pu.toString(), size: 4, schema: 'public' });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const { wp, events } = startPool({ t: async () => gate }, { pool, url: pu.toString() });
      await wp.start();
      await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
      await waitFor(async () => (await statuses()).running === 1);
      // Away from before the job ends until its write has failed.
      proxy.down();
      release();
      await waitFor(() => events('job.write_error').length > 0, 20_000);
      expect((await statuses()).running).toBe(1);
      proxy.up();
      await waitFor(async () => (await statuses()).completed === 1, 20_000);
      expect((await db.pool.query('select attempts from jobs')).rows[0].attempts).toBe(1);
      // Logged once the write's answer is read, a moment after the row changed.
      await waitFor(() => events('job.completed').length > 0, 5_000);
      expect(events('job.completed')).toHaveLength(1);
      await wp.stop();
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('graceful shutdown: finished jobs complete, the rest are aborted and handed back unspent', async () => {
    // The quick jobs finish the moment the stop begins (inside the grace whatever the load); the
    // slow ones only when aborted.
    let stopBegan!: () => void;
    const stopping = new Promise<void>((r) => (stopBegan = r));
    let started = 0;
    const { wp, events } = startPool(
      {
        quick: async () => {
          started++;
          return stopping;
        },
        slow: async (_j, { signal }) => {
          started++;
          return sleep(60_000, signal);
        },
      },
      { shutdownGraceMs: 1_500 },
    );
    await wp.start();
    await enqueueJobs(
      db.pool,
      [
        ...Array.from({ length: 3 }, () => ({ type: 'quick', payload: {}, maxAttempts: 3 })),
        ...Array.from({ length: 3 }, () => ({ type: 'slow', payload: {}, maxAttempts: 3 })),
      ],
      CH,
    );
    await waitFor(async () => (await statuses()).running === 6);
    // Running in the database is not yet running here: a claim whose answer arrives after the stop
    // began hands its jobs back unrun (tested below), so wait for every handler to have started.
    await waitFor(() => started === 6);
    const stopped = wp.stop();
    stopBegan();
    await stopped;
    const rows = (await db.pool.query(`select type, status, attempts from jobs order by type`)).rows;
    // Whole rows, so a failure shows what the quick jobs came to.
    expect(rows.filter((r) => r.type === 'quick')).toEqual(
      Array.from({ length: 3 }, () => ({ type: 'quick', status: 'completed', attempts: 1 })),
    );
    expect(rows.filter((r) => r.type === 'slow')).toEqual(
      Array.from({ length: 3 }, () => ({ type: 'slow', status: 'pending', attempts: 0 })),
    );
    expect(events('jobs.module.shutdown_timeout')).toHaveLength(1);
  });

  it('a claim that returns after the stop began hands its jobs straight back, unrun and unspent', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    const pool = createPool({ url: pu.toString(), size: 4, schema: 'public' });
    try {
      let ran = false;
      const { wp } = startPool({ t: async () => void (ran = true) }, { pool, url: pu.toString() });
      await wp.start();
      // The loop at rest: no claim, and no query of it in flight (a short claim is followed by a
      // read of the due index, whose answer would be held too and keep the loop from claiming).
      await waitFor(() => !wp.claiming && pool.totalCount > 0 && pool.idleCount === pool.totalCount && pool.waitingCount === 0);
      // Whatever the database answers through the proxy is held back from here: the claim below,
      // and the enqueue's NOTIFY (the LISTEN connection goes through it too), which would otherwise
      // start a claim of its own before the hold...
      proxy.hold();
      await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
      // ...so the claim runs in the database, but its answer waits...
      wp.wake(true);
      await waitFor(async () => (await statuses()).running === 1);
      // ...until the stop has begun.
      const stopped = wp.stop();
      proxy.release();
      await stopped;
      expect(ran).toBe(false);
      expect((await db.pool.query('select status, attempts from jobs')).rows).toEqual([{ status: 'pending', attempts: 0 }]);
    } finally {
      proxy.release();
      await pool.end();
      await proxy.close();
    }
  });

  it('stop does not wait for ever on outcomes it cannot write: after its drain timeout it logs job.write_error and returns', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    const pool = createPool({ url: pu.toString(), size: 4, schema: 'public' });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const { wp, events } = startPool({ t: async () => gate }, { pool, url: pu.toString() });
      await wp.start();
      await enqueueJobs(db.pool, [{ type: 't', payload: {}, maxAttempts: 3 }], CH);
      await waitFor(async () => (await statuses()).running === 1);
      // Away until stop has returned: stop gives up after its 10 s drain timeout (src/queue/worker.ts).
      proxy.down();
      release();
      await waitFor(() => events('job.write_error').length > 0, 20_000);
      await wp.stop();
      proxy.up();
      expect(events('job.write_error').at(-1)).toMatchObject({ jobs: 1, msg: 'could not write every outcome before stopping' });
      // Left running, for the reaper to hand back.
      expect((await db.pool.query('select status from jobs')).rows).toEqual([{ status: 'running' }]);
    } finally {
      await pool.end();
      await proxy.close();
    }
  }, 40_000);

  it('a handler that ignores the abort is still handed back at shutdown', async () => {
    const { wp } = startPool({ stuck: () => new Promise(() => undefined) }, { shutdownGraceMs: 100 });
    await wp.start();
    await enqueueJobs(db.pool, [{ type: 'stuck', payload: {}, maxAttempts: 3 }], CH);
    await waitFor(async () => (await statuses()).running === 1);
    await wp.stop();
    expect(await statuses()).toEqual({ pending: 1 });
  });

  it('an endpoint whose cap holds back a claim is claimed again as soon as a slot frees (no wait for the poll)', async () => {
    const { wp } = startPool(
      { t: async (_j, { signal }) => sleep(Math.floor(Math.random() * 8), signal) },
      { concurrency: 8, endpointLimits: () => new Map([['one', 3]]) },
    );
    await wp.start();
    await enqueueJobs(
      db.pool,
      Array.from({ length: 300 }, () => ({ type: 't', payload: {}, maxAttempts: 3, endpoint: 'one' })),
      CH,
    );
    // The poll is 60 s: finishing all of them in seconds means every freed slot led to a claim.
    await waitFor(async () => (await statuses()).completed === 300, 15_000);
    expect(await statuses()).toEqual({ completed: 300 });
  });

  it('jobs of an endpoint not configured here, waiting at start, are claimed once the discovery read finds it (no wait for the poll)', async () => {
    // The discovery read runs beside the first claim, not before it: that claim cannot know the
    // endpoint, so finding it must wake the loop. The poll is 60 s.
    await enqueueJobs(
      db.pool,
      Array.from({ length: 5 }, () => ({ type: 't', payload: {}, maxAttempts: 3, endpoint: 'elsewhere' })),
      CH,
    );
    const { wp } = startPool({ t: async () => undefined }, { endpointLimits: () => new Map([['here', 4]]) });
    await wp.start();
    await waitFor(async () => (await statuses()).completed === 5, 15_000);
    expect(await statuses()).toEqual({ completed: 5 });
  });

  it('an endpoint at its max_in_flight cap cannot hold every worker', async () => {
    const { wp } = startPool(
      {
        t: async (j, { signal }) => {
          if (j.endpoint === 'hanging') await sleep(60_000, signal).catch(() => undefined);
        },
      },
      {
        concurrency: 4,
        endpointLimits: () =>
          new Map([
            ['hanging', 2],
            ['fine', 16],
          ]),
        shutdownGraceMs: 50,
      },
    );
    await wp.start();
    await enqueueJobs(
      db.pool,
      Array.from({ length: 6 }, () => ({ type: 't', payload: {}, maxAttempts: 3, endpoint: 'hanging' })),
      CH,
    );
    await waitFor(async () => (await statuses()).running === 2);
    await enqueueJobs(
      db.pool,
      Array.from({ length: 20 }, () => ({ type: 't', payload: {}, maxAttempts: 3, endpoint: 'fine' })),
      CH,
    );
    await waitFor(async () => (await statuses()).completed === 20, 5_000);
    expect((await statuses()).running).toBe(2);
  });
});
