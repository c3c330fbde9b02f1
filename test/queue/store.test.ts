import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/queue/backoff.js';
import { pendingEndpoints } from '../../src/queue/store.js';
import { claimJobs, completeJobs, enqueueJobs, failJobs, releaseJobs, renewLeases } from '../../src/queue/transitions.js';
import { reapExpiredJobs } from '../../src/runners/reaper.js';
import type { DeadJob } from '../../src/queue/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, job_counts, job_attempts, delivery_stats');
});

const CH = 'public.acw_jobs';
const job = (n = 0, extra: Partial<{ maxAttempts: number; delayMs: number; endpoint: string }> = {}) => ({
  type: 't',
  payload: { n },
  maxAttempts: extra.maxAttempts ?? 3,
  ...extra,
});

/** A claim plan of 10 deliveries over these endpoints' slots (and `workers` jobs with no endpoint). */
const plan = (endpoints: Map<string, number>, workers = 0) => ({ workers, deliveries: 10, total: 10, endpoints });

describe('queue store', () => {
  it('enqueues many in one statement and claims in run_at order with a lease from the database clock', async () => {
    const ids = await enqueueJobs(db.pool, [job(1), job(2), job(3, { delayMs: 60_000 })], CH);
    expect(ids).toHaveLength(3);
    const claimed = await claimJobs(db.pool, { workerId: 'w1', limit: 10, leaseMs: 30_000 });
    expect(claimed.map((j) => (j.payload as { n: number }).n).toSorted()).toEqual([1, 2]);
    const { rows } = await db.pool.query(
      `select status, attempts, locked_by, lease_token, extract(epoch from lease_expires_at - now()) as left_s from jobs where status = 'running'`,
    );
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      expect(r.status).toBe('running');
      expect(r.attempts).toBe(1);
      expect(r.locked_by).toBe('w1');
      expect(Number(r.left_s)).toBeGreaterThan(29);
    }
    expect(new Set(claimed.map((c) => c.leaseToken)).size).toBe(2);
    expect(await claimJobs(db.pool, { workerId: 'w2', limit: 10, leaseMs: 30_000 })).toEqual([]);
  });

  it('gives each job to one claimer when many claim at once', async () => {
    await enqueueJobs(
      db.pool,
      Array.from({ length: 300 }, (_, i) => job(i)),
      CH,
    );
    const batches = await Promise.all(
      Array.from({ length: 6 }, (_, i) => claimJobs(db.pool, { workerId: `w${i}`, limit: 80, leaseMs: 30_000 })),
    );
    const all = batches.flat().map((j) => j.id);
    expect(all).toHaveLength(300);
    expect(new Set(all).size).toBe(300);
  });

  it('a worker whose lease was reaped and re-claimed writes nothing, and its attempt row is flagged', async () => {
    await enqueueJobs(db.pool, [job(1)], CH);
    const [a] = await claimJobs(db.pool, { workerId: 'same-process', limit: 1, leaseMs: 30_000 });
    await db.pool.query(`update jobs set lease_expires_at = now() - interval '1 second'`);
    const { log } = captureLogs();
    expect(await reapExpiredJobs(db.pool, { channel: CH, log })).toBe(1);
    // The same process claims it again: locked_by alone could not tell the two claims apart.
    const [b] = await claimJobs(db.pool, { workerId: 'same-process', limit: 1, leaseMs: 30_000 });
    expect(b!.id).toBe(a!.id);
    const att = { attempt: 1, endpoint: null, statusCode: 200, errorKind: null, error: null, durationMs: 5, responseBody: 'ok' };
    const stale = await completeJobs(db.pool, [{ leased: { id: a!.id, leaseToken: a!.leaseToken }, attempt: att }]);
    expect(stale.size).toBe(0);
    const staleFail = await failJobs(db.pool, [{ leased: a!, error: 'x', dead: true, reason: 'permanent', delayMs: 0 }]);
    expect(staleFail.changed.size).toBe(0);
    expect(await releaseJobs(db.pool, [{ leased: a!, delayMs: 0 }])).toEqual(new Set());
    expect((await renewLeases(db.pool, [a!], 1000)).size).toBe(0);
    const row = (await db.pool.query('select status, attempts, lease_token from jobs')).rows[0];
    expect(row).toMatchObject({ status: 'running', attempts: 2, lease_token: b!.leaseToken });
    const atts = (await db.pool.query('select lease_lost from webhook_attempts')).rows;
    expect(atts).toEqual([{ lease_lost: true }]);
    expect((await completeJobs(db.pool, [{ leased: b!, attempt: { ...att, attempt: 2 } }])).has(b!.id)).toBe(true);
  });

  it('writing the same outcome twice (a retried write) adds no second attempt row', async () => {
    await enqueueJobs(db.pool, [job(1)], CH);
    const [a] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    const att = { attempt: 1, endpoint: 'default', statusCode: 200, errorKind: null, error: null, durationMs: 3, responseBody: '' };
    expect((await completeJobs(db.pool, [{ leased: a!, attempt: att }])).size).toBe(1);
    expect((await completeJobs(db.pool, [{ leased: a!, attempt: att }])).size).toBe(0);
    expect((await db.pool.query('select attempt, lease_lost from webhook_attempts')).rows).toEqual([{ attempt: 1, lease_lost: false }]);
  });

  it('fail schedules the retry after the given delay, then dead at max_attempts with the hook fired once', async () => {
    await enqueueJobs(db.pool, [job(1, { maxAttempts: 2 })], CH);
    const dead: DeadJob[] = [];
    const hook = async (_c: unknown, jobs: DeadJob[]) => void dead.push(...jobs);
    const [a] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    const r1 = await failJobs(db.pool, [{ leased: a!, error: 'boom', dead: false, reason: 'max_attempts', delayMs: 5_000 }], hook);
    expect(r1.changed.get(a!.id)?.status).toBe('pending');
    // Measured from the write itself (updated_at), not from when this query happens to run.
    const { rows } = await db.pool.query(`select extract(epoch from run_at - updated_at) * 1000 as ms, last_error from jobs`);
    expect(Number(rows[0].ms)).toBe(5_000);
    expect(rows[0].last_error).toBe('boom');
    await db.pool.query('update jobs set run_at = now()');
    const [b] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    expect(b!.attempts).toBe(2);
    const r2 = await failJobs(db.pool, [{ leased: b!, error: 'boom again', dead: false, reason: 'max_attempts', delayMs: 5_000 }], hook);
    expect(r2.changed.get(b!.id)?.status).toBe('dead');
    // Writing the same outcome again (a retried write) changes nothing and fires nothing.
    await failJobs(db.pool, [{ leased: b!, error: 'boom again', dead: false, reason: 'max_attempts', delayMs: 5_000 }], hook);
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ id: b!.id, reason: 'max_attempts', lastError: 'boom again', attempts: 2 });
  });

  it('a permanent failure is dead on the first attempt with the hook fired once', async () => {
    await enqueueJobs(db.pool, [job(1, { maxAttempts: 5 })], CH);
    const dead: DeadJob[] = [];
    const [a] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    await failJobs(
      db.pool,
      [{ leased: a!, error: '410 gone', dead: true, reason: 'permanent', delayMs: 0 }],
      async (_c, j) => void dead.push(...j),
    );
    expect(dead.map((d) => [d.id, d.reason])).toEqual([[a!.id, 'permanent']]);
    expect((await db.pool.query('select status, attempts from jobs')).rows[0]).toEqual({ status: 'dead', attempts: 1 });
  });

  it('the hook runs in the same transaction: when it fails, the job stays running', async () => {
    await enqueueJobs(db.pool, [job(1)], CH);
    const [a] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    await expect(
      failJobs(db.pool, [{ leased: a!, error: 'x', dead: true, reason: 'permanent', delayMs: 0 }], async () => {
        throw new Error('hook failed');
      }),
    ).rejects.toThrow('hook failed');
    expect((await db.pool.query('select status from jobs')).rows[0].status).toBe('running');
  });

  it('release hands a job back without spending its attempt', async () => {
    await enqueueJobs(db.pool, [job(1)], CH);
    const [a] = await claimJobs(db.pool, { workerId: 'w', limit: 1, leaseMs: 30_000 });
    expect((await releaseJobs(db.pool, [{ leased: a!, delayMs: 0, park: 'unknown', error: 'endpoint unknown' }])).size).toBe(1);
    const row = (await db.pool.query('select status, attempts, parked_since is not null as parked, locked_by from jobs')).rows[0];
    expect(row).toEqual({ status: 'pending', attempts: 0, parked: true, locked_by: null });
  });

  it('the reaper sends a job on its last attempt to dead with the hook fired once', async () => {
    await enqueueJobs(db.pool, [job(1, { maxAttempts: 1 }), job(2, { maxAttempts: 2 })], CH);
    await claimJobs(db.pool, { workerId: 'crashed', limit: 2, leaseMs: 30_000 });
    await db.pool.query(`update jobs set lease_expires_at = now() - interval '1 second'`);
    const dead: DeadJob[] = [];
    const { log, events } = captureLogs();
    const hook = async (_c: unknown, j: DeadJob[]) => void dead.push(...j);
    await Promise.all([
      reapExpiredJobs(db.pool, { channel: CH, log, onDead: hook }),
      reapExpiredJobs(db.pool, { channel: CH, log, onDead: hook }),
    ]);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.reason).toBe('reaped');
    const rows = (await db.pool.query(`select payload->>'n' as n, status, attempts from jobs order by 1`)).rows;
    expect(rows).toEqual([
      { n: '1', status: 'dead', attempts: 1 },
      { n: '2', status: 'pending', attempts: 1 },
    ]);
    expect(events('job.reaped')).toHaveLength(2);
  });

  it('per-endpoint slots: each endpoint gets at most its free slots, a capped one none, and pendingEndpoints finds them all', async () => {
    await enqueueJobs(
      db.pool,
      [
        ...Array.from({ length: 5 }, (_, i) => job(i, { endpoint: 'slow' })),
        ...Array.from({ length: 5 }, (_, i) => job(10 + i, { endpoint: 'fast' })),
      ],
      CH,
    );
    await enqueueJobs(db.pool, [job(99)], CH);
    expect((await pendingEndpoints(db.pool)).toSorted()).toEqual(['fast', 'slow']);
    const got = await claimJobs(db.pool, {
      workerId: 'w',
      leaseMs: 30_000,
      plan: plan(
        new Map([
          ['slow', 2],
          ['fast', 10],
        ]),
      ),
    });
    expect(got.filter((j) => j.endpoint === 'slow')).toHaveLength(2);
    expect(got.filter((j) => j.endpoint === 'fast')).toHaveLength(5);
    expect(got.filter((j) => j.endpoint === null)).toHaveLength(0);
    const none = await claimJobs(db.pool, { workerId: 'w', leaseMs: 30_000, plan: plan(new Map([['slow', 0]])) });
    expect(none).toEqual([]);
    const unkeyed = await claimJobs(db.pool, { workerId: 'w', leaseMs: 30_000, plan: plan(new Map([['slow', 0]]), 10) });
    expect(unkeyed.map((j) => (j.payload as { n: number }).n)).toEqual([99]);
  });

  it('fair claims: endpoints take turns, each oldest first, so an old backlog cannot crowd out a newer endpoint', async () => {
    await db.pool.query(`delete from jobs`);
    // 'stuck' has 50 jobs, all older than the 3 of 'fresh'.
    await enqueueJobs(
      db.pool,
      Array.from({ length: 50 }, (_, i) => job(i, { endpoint: 'stuck' })),
      CH,
    );
    await db.pool.query(`update jobs set run_at = now() - interval '1 hour' + (payload->>'n')::int * interval '1 second'`);
    await enqueueJobs(
      db.pool,
      Array.from({ length: 3 }, (_, i) => job(100 + i, { endpoint: 'fresh' })),
      CH,
    );
    const endpoints = new Map([
      ['stuck', 50],
      ['fresh', 50],
    ]);
    const got = await claimJobs(db.pool, { workerId: 'w', leaseMs: 30_000, plan: { workers: 0, deliveries: 4, total: 4, endpoints } });
    expect(got).toHaveLength(4);
    expect(got.filter((j) => j.endpoint === 'fresh')).toHaveLength(2);
    // The oldest of each endpoint first: stuck's two oldest, fresh's two oldest.
    expect(
      got
        .filter((j) => j.endpoint === 'stuck')
        .map((j) => (j.payload as { n: number }).n)
        .toSorted((a, b) => a - b),
    ).toEqual([0, 1]);
  });
});

describe('back-off', () => {
  it('follows min(base * 2^(attempt-1), max) with jitter around it', () => {
    const p = { base: 10_000, max: 300_000, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(p, a))).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
    const j = { base: 10_000, max: 300_000, jitter: 0.2 };
    expect(backoffDelay(j, 1, () => 0)).toBe(8_000);
    expect(backoffDelay(j, 1, () => 1)).toBe(12_000);
    expect(backoffDelay(j, 1, () => 0.5)).toBe(10_000);
  });
});
