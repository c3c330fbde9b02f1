import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Flusher, type Finished } from '../../src/queue/flusher.js';
import type { AttemptRecord, ClaimedJob, DeadJob, JobOutcome } from '../../src/queue/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { insertRunningJobs } from '../helpers/jobs.js';

/**
 * The Flusher alone, against real PostgreSQL: jobs are inserted as running with known lease
 * tokens, and the pool it writes through is the real one behind a wrapper that records (and can
 * hold or fail) each statement carrying job ids.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, job_counts, job_attempts, delivery_stats');
});

async function runningJobs(n: number, maxAttempts = 3): Promise<ClaimedJob[]> {
  return insertRunningJobs(db.pool, n, { maxAttempts });
}

const attempt = (statusCode = 200): AttemptRecord => ({
  attempt: 1,
  endpoint: null,
  statusCode,
  errorKind: statusCode >= 400 ? 'http_status' : null,
  error: statusCode >= 400 ? `HTTP ${statusCode}` : null,
  durationMs: 5,
  responseBody: 'ok',
});
const finished = (job: ClaimedJob, outcome: JobOutcome, delayMs = 0): Finished => ({ job, outcome, delayMs, leaseLost: false });
const complete = (job: ClaimedJob) => finished(job, { kind: 'complete', attempt: attempt() });
const retry = (job: ClaimedJob) => finished(job, { kind: 'retry', error: 'HTTP 503', attempt: attempt(503) }, 60_000);

interface Statement {
  ids: string[];
}

/**
 * The test database's pool behind a wrapper: every statement whose first parameter is an array of
 * job ids is recorded (in the order issued) and passed to `before`, which may hold it or throw.
 */
function watchedPool(before: (s: Statement, n: number) => Promise<void> | void = () => undefined): {
  pool: pg.Pool;
  statements: Statement[];
} {
  const statements: Statement[] = [];
  const watch =
    (query: (...a: unknown[]) => Promise<unknown>) =>
    async (...args: unknown[]): Promise<unknown> => {
      const cfg = args[0] as { values?: unknown[] } | string;
      const first = typeof cfg === 'object' ? cfg.values?.[0] : undefined;
      if (Array.isArray(first) && first.length > 0 && typeof first[0] === 'string') {
        const s = { ids: [...(first as string[])] };
        statements.push(s);
        await before(s, statements.length);
      }
      return query(...args);
    };
  const wrapClient = (client: pg.PoolClient) =>
    new Proxy(client, {
      get(t, p) {
        const v: unknown = Reflect.get(t, p);
        if (p === 'query') return watch(t.query.bind(t) as (...a: unknown[]) => Promise<unknown>);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  const pool = new Proxy(db.pool, {
    get(t, p) {
      const v: unknown = Reflect.get(t, p);
      if (p === 'query') return watch(t.query.bind(t) as (...a: unknown[]) => Promise<unknown>);
      if (p === 'connect') return async () => wrapClient(await t.connect());
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { pool, statements };
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

async function rows(ids: string[]) {
  const res = await db.pool.query<{ id: string; status: string; attempts: number; lease_token: string | null; last_error: string | null }>(
    'select id, status, attempts, lease_token, last_error from jobs where id = any($1::uuid[])',
    [ids],
  );
  return new Map(res.rows.map((r) => [r.id, r]));
}

const sorted = (ids: string[]) => ids.toSorted();

describe('Flusher', () => {
  it('writes what finished during a write in the next batch, one statement per kind', async () => {
    const [a, b, c, d] = await runningJobs(4);
    const held = gate();
    const { pool, statements } = watchedPool((_s, n) => (n === 1 ? held.wait : undefined));
    const { log } = captureLogs();
    const f = new Flusher({ pool, log });
    f.push(complete(a!));
    await waitFor(() => statements.length === 1);
    // The first write is under way: these three wait for it, then go together.
    f.push(complete(b!));
    f.push(complete(c!));
    f.push(retry(d!));
    expect(f.pending).toBe(3);
    expect(statements).toHaveLength(1);
    held.open();
    await f.drain();
    expect(statements[0]!.ids).toEqual([a!.id]);
    const next = statements.slice(1).map((s) => sorted(s.ids));
    expect(next.toSorted((x, y) => x.length - y.length)).toEqual([[d!.id], sorted([b!.id, c!.id])]);
    const r = await rows([a!.id, b!.id, c!.id, d!.id]);
    expect([a, b, c].map((j) => r.get(j!.id)!.status)).toEqual(['completed', 'completed', 'completed']);
    expect(r.get(d!.id)).toMatchObject({ status: 'pending', lease_token: null, last_error: 'HTTP 503' });
  });

  it('retries a failed write by itself: the outcome is neither lost nor written twice', async () => {
    const [x, a, b, c] = await runningJobs(4);
    const held = gate();
    let failed = false;
    const { pool, statements } = watchedPool((s, n) => {
      if (n === 1) return held.wait;
      if (!failed && s.ids.includes(a!.id)) {
        failed = true;
        throw new Error('connection reset');
      }
      return undefined;
    });
    const { log, events } = captureLogs();
    const written: Array<[string, boolean]> = [];
    const f = new Flusher({ pool, log, onWritten: (fin, changed) => written.push([fin.job.id, changed]) });
    f.push(complete(x!));
    await waitFor(() => statements.length === 1);
    // One batch with a complete, a fail and a release; only the complete's statement fails.
    f.push(complete(a!));
    f.push(retry(b!));
    f.push(finished(c!, { kind: 'release', delayMs: 0, error: 'unknown endpoint', attempt: attempt(0) }));
    held.open();
    await f.drain();

    const touching = (id: string) => statements.filter((s) => s.ids.includes(id)).length;
    expect([touching(a!.id), touching(b!.id), touching(c!.id)]).toEqual([2, 1, 1]);
    expect(statements.find((s) => s.ids.includes(a!.id))!.ids).toEqual([a!.id]);
    expect(events('job.write_error')).toEqual([expect.objectContaining({ jobs: 1 })]);
    expect(events('job.lease_lost')).toEqual([]);
    expect(written.toSorted()).toEqual([x, a, b, c].map((j) => [j!.id, true]).toSorted());
    const r = await rows([a!.id, b!.id, c!.id]);
    expect(r.get(a!.id)).toMatchObject({ status: 'completed', attempts: 1 });
    expect(r.get(b!.id)).toMatchObject({ status: 'pending', attempts: 1, last_error: 'HTTP 503' });
    expect(r.get(c!.id)).toMatchObject({ status: 'pending', attempts: 0 });
    const att = await db.pool.query<{ job_id: string; lease_lost: boolean }>('select job_id, lease_lost from webhook_attempts');
    expect(sorted(att.rows.map((row) => row.job_id))).toEqual(sorted([x!.id, a!.id, b!.id, c!.id]));
    expect(att.rows.every((row) => !row.lease_lost)).toBe(true);
  });

  it('an outcome whose lease was lost changes nothing but its attempt row', async () => {
    const jobs = await runningJobs(4, 1);
    const before = await db.pool.query('select * from jobs order by id');
    // The lease each run holds is not the job's lease any more (reaped, claimed again elsewhere).
    const stale = jobs.map((j) => ({ ...j, leaseToken: randomUUID() }));
    const { log, events } = captureLogs();
    const written: Array<[string, boolean]> = [];
    const dead: DeadJob[] = [];
    const f = new Flusher({
      pool: db.pool,
      log,
      onDead: async (_c, d) => void dead.push(...d),
      onWritten: (fin, changed) => written.push([fin.job.id, changed]),
    });
    f.push(complete(stale[0]!));
    f.push(retry(stale[1]!));
    f.push(finished(stale[2]!, { kind: 'permanent', error: 'HTTP 410', attempt: attempt(410) }));
    f.push(finished(stale[3]!, { kind: 'release', delayMs: 0, error: 'unknown endpoint', attempt: attempt(0) }));
    await f.drain();

    expect((await db.pool.query('select * from jobs order by id')).rows).toEqual(before.rows);
    expect(dead).toEqual([]);
    expect(written.toSorted()).toEqual(jobs.map((j) => [j.id, false]).toSorted());
    expect(events('job.lease_lost')).toHaveLength(4);
    const att = await db.pool.query<{ job_id: string; lease_lost: boolean }>('select job_id, lease_lost from webhook_attempts');
    expect(sorted(att.rows.map((row) => row.job_id))).toEqual(sorted(jobs.map((j) => j.id)));
    expect(att.rows.every((row) => row.lease_lost)).toBe(true);
  });

  it('a release parked longer than its deadline is written as dead, reason parked', async () => {
    const [old, recent] = await runningJobs(2);
    const park = { reason: 'unknown' as const, deadAfterMs: 60_000 };
    const dead: DeadJob[] = [];
    const f = new Flusher({ pool: db.pool, log: captureLogs().log, onDead: async (_c, d) => void dead.push(...d) });
    f.push(
      finished(
        { ...old!, endpointUnknownSince: new Date(Date.now() - 120_000) },
        { kind: 'release', delayMs: 1_000, error: 'unknown endpoint', park },
      ),
    );
    f.push(
      finished(
        { ...recent!, endpointUnknownSince: new Date(Date.now() - 1_000) },
        { kind: 'release', delayMs: 1_000, error: 'unknown endpoint', park },
      ),
    );
    await f.drain();
    expect(dead.map((d) => [d.id, d.reason])).toEqual([[old!.id, 'parked']]);
    const r = await rows([old!.id, recent!.id]);
    expect(r.get(old!.id)!.status).toBe('dead');
    expect(r.get(recent!.id)).toMatchObject({ status: 'pending', attempts: 0 });
  });

  it('drain() resolves once everything pushed is written, a retried write included', async () => {
    const [a, b] = await runningJobs(2);
    let failures = 0;
    const { pool } = watchedPool(() => {
      if (failures++ === 0) throw new Error('connection reset');
    });
    const { log } = captureLogs();
    const f = new Flusher({ pool, log });
    f.push(complete(a!));
    f.push(complete(b!));
    expect(f.idle).toBe(false);
    await f.drain();
    expect(failures).toBeGreaterThan(1);
    expect(f.idle).toBe(true);
    expect(f.pending).toBe(0);
    const r = await rows([a!.id, b!.id]);
    expect([r.get(a!.id)!.status, r.get(b!.id)!.status]).toEqual(['completed', 'completed']);
    // Nothing pushed: drain() returns at once.
    await f.drain();
  });
});
