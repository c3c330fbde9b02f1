import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Heartbeat, type Running } from '../../src/queue/heartbeat.js';
import type { ClaimedJob } from '../../src/queue/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { insertRunningJobs } from '../helpers/jobs.js';

/**
 * The Heartbeat alone, against real PostgreSQL: jobs are inserted as running with known lease
 * tokens, and renewals go through the real pool behind a wrapper that records them and can make
 * them fail or hang. A 6 s lease gives a renewal every 2 s (1 s after a failed one) and a 600 ms safety margin.
 */

const LEASE_MS = 6_000;
const MARGIN_MS = 600;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, job_counts, job_attempts, delivery_stats');
});
const stops: Array<() => void> = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

async function runningJobs(n: number): Promise<ClaimedJob[]> {
  return insertRunningJobs(db.pool, n, { leaseMs: LEASE_MS });
}

/** What the worker pool keeps for each job it holds; `lostAt` is when its signal aborted. */
interface Held extends Running {
  lostAt?: number;
}

function hold(jobs: ClaimedJob[]): { running: Map<string, Running>; held: Held[] } {
  const held = jobs.map((job): Held => ({
    job,
    ctl: new AbortController(),
    leaseLost: false,
    shutdownAborted: false,
    expiresAt: job.leaseExpiresAt,
  }));
  for (const h of held) h.ctl.signal.addEventListener('abort', () => (h.lostAt = Date.now()));
  return { running: new Map(held.map((h) => [h.job.leaseToken, h])), held };
}

/** The test database's pool; every renewal (a statement carrying job ids) is recorded and passed to `before` first. */
function watchedPool(before: (n: number) => Promise<void> | void = () => undefined): { pool: pg.Pool; renewals: string[][] } {
  const renewals: string[][] = [];
  const pool = new Proxy(db.pool, {
    get(t, p) {
      const v: unknown = Reflect.get(t, p);
      if (p === 'query') {
        const query = t.query.bind(t) as (...a: unknown[]) => Promise<unknown>;
        return async (...args: unknown[]): Promise<unknown> => {
          const first = (args[0] as { values?: unknown[] }).values?.[0];
          if (Array.isArray(first)) {
            renewals.push([...(first as string[])]);
            await before(renewals.length);
          }
          return query(...args);
        };
      }
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { pool, renewals };
}

function start(pool: pg.Pool, running: Map<string, Running>) {
  const logs = captureLogs();
  const hb = new Heartbeat({ pool, leaseMs: LEASE_MS, log: logs.log, running, needed: () => true });
  hb.start();
  stops.push(() => hb.stop());
  return logs;
}

async function dbExpiries(ids: string[]): Promise<Map<string, number>> {
  const res = await db.pool.query<{ id: string; ms: number }>(
    'select id, extract(epoch from lease_expires_at)::float8 * 1000 as ms from jobs where id = any($1::uuid[])',
    [ids],
  );
  return new Map(res.rows.map((r) => [r.id, r.ms]));
}

describe('Heartbeat', () => {
  it('renews every lease in one statement and keeps the expiry the database issued', async () => {
    const jobs = await runningJobs(3);
    const ids = jobs.map((j) => j.id);
    const first = await dbExpiries(ids);
    const { running, held } = hold(jobs);
    const { pool, renewals } = watchedPool();
    const { events } = start(pool, running);
    await waitFor(() => held.every((h) => h.expiresAt > h.job.leaseExpiresAt), 15_000);
    expect(renewals.length).toBeGreaterThan(0);
    for (const r of renewals) expect(r.toSorted()).toEqual(ids.toSorted());
    const now = await dbExpiries(ids);
    for (const id of ids) expect(now.get(id)!).toBeGreaterThan(first.get(id)!);
    expect(held.some((h) => h.leaseLost || h.ctl.signal.aborted)).toBe(false);
    expect(events('job.lease_lost')).toEqual([]);
  });

  it('loses a lease whose renewal updates no row: its signal aborts, the others are kept', async () => {
    const [a, b, c] = await runningJobs(3);
    // b's lease is no longer the job's (reaped and claimed again elsewhere).
    const { running, held } = hold([a!, { ...b!, leaseToken: randomUUID() }, c!]);
    const { pool } = watchedPool();
    const { events } = start(pool, running);
    await waitFor(() => held[1]!.ctl.signal.aborted, 15_000);
    expect(held[1]!.leaseLost).toBe(true);
    expect((held[1]!.ctl.signal.reason as Error).message).toBe('lease lost');
    expect(events('job.lease_lost')).toEqual([expect.objectContaining({ job_id: b!.id, why: 'lease renewal updated no row' })]);
    await waitFor(() => held[0]!.expiresAt > a!.leaseExpiresAt && held[2]!.expiresAt > c!.leaseExpiresAt, 15_000);
    expect([held[0]!.leaseLost, held[2]!.leaseLost]).toEqual([false, false]);
  });

  it('a renewal that fails once loses nothing: the lease stands until its database-issued expiry', async () => {
    const jobs = await runningJobs(2);
    const { running, held } = hold(jobs);
    const { pool, renewals } = watchedPool((n) => {
      if (n === 1) throw new Error('connection reset');
    });
    const { events } = start(pool, running);
    await waitFor(() => held.every((h) => h.expiresAt > h.job.leaseExpiresAt), 15_000);
    expect(renewals.length).toBeGreaterThan(1);
    expect(events('job.heartbeat_error')).toHaveLength(1);
    expect(held.some((h) => h.leaseLost || h.ctl.signal.aborted)).toBe(false);
    expect(events('job.lease_lost')).toEqual([]);
  });

  it('while renewals fail, a lease is lost at its last database-issued expiry, not before', async () => {
    const [job] = await runningJobs(1);
    const { running, held } = hold([job!]);
    // The first renewal goes through (a later expiry than the claim's); every one after fails.
    const { pool } = watchedPool((n) => {
      if (n > 1) throw new Error('connection refused');
    });
    const { events } = start(pool, running);
    const h = held[0]!;
    await waitFor(() => h.expiresAt > job!.leaseExpiresAt, 15_000);
    const renewed = h.expiresAt;
    await waitFor(() => h.lostAt, 15_000);
    expect(h.leaseLost).toBe(true);
    expect(h.lostAt!).toBeGreaterThanOrEqual(renewed - MARGIN_MS);
    expect(events('job.lease_lost')).toEqual([
      expect.objectContaining({ job_id: job!.id, why: 'lease expired while the database was unreachable' }),
    ]);
    expect(events('job.heartbeat_error').length).toBeGreaterThan(0);
  });

  it('while a renewal hangs, a lease is lost at its database-issued expiry, not before', async () => {
    const [job] = await runningJobs(1);
    const { running, held } = hold([job!]);
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    const { pool, renewals } = watchedPool(() => hung);
    const { events } = start(pool, running);
    stops.push(release);
    const h = held[0]!;
    await waitFor(() => h.lostAt, 15_000);
    expect(h.lostAt!).toBeGreaterThanOrEqual(job!.leaseExpiresAt - MARGIN_MS);
    // No second renewal is sent while the first hangs.
    expect(renewals).toHaveLength(1);
    expect(events('job.lease_lost')).toEqual([expect.objectContaining({ job_id: job!.id, why: 'lease expired while its renewal hung' })]);
  });
});
