import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { Queryable } from '../../src/db/pool.js';
import { durationBucket, DURATION_BUCKETS } from '../../src/queue/attempt-rows.js';
import { claimJobs, completeJobs, enqueueJobs, failJobs, releaseJobs, renewLeases } from '../../src/queue/transitions.js';
import type { ClaimedJob } from '../../src/queue/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * What the outcome statements cost PostgreSQL, checked by their plans (bench/README.md, "Cost per
 * delivery"): they reach the jobs a worker holds by primary key whatever the statistics say, and
 * their plans hold no partition of job_attempts.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

const CH = 'public.acw_jobs';
const attempt = (durationMs: number) => ({
  attempt: 1,
  endpoint: 'e1',
  statusCode: 200,
  errorKind: null,
  error: null,
  durationMs,
  responseBody: 'ok',
  aborted: false,
});

/** A Queryable that records the statements it is given instead of running them. */
function capture(): Queryable & { seen: Array<{ text: string; values: unknown[] }> } {
  const seen: Array<{ text: string; values: unknown[] }> = [];
  const q = async (cfg: { text: string; values?: unknown[] }) => {
    seen.push({ text: cfg.text, values: cfg.values ?? [] });
    return { rows: [], rowCount: 0 };
  };
  return { seen, query: q } as unknown as Queryable & { seen: Array<{ text: string; values: unknown[] }> };
}

/** The plan of a captured statement as a prepared statement (generic or custom), rolled back. */
async function planOf(client: pg.ClientBase, stmt: { text: string; values: unknown[] }, mode: string): Promise<string> {
  const lit = (v: unknown): string =>
    v === null
      ? 'null'
      : Array.isArray(v)
        ? client.escapeLiteral(`{${v.map((x) => (x === null ? 'NULL' : String(x))).join(',')}}`)
        : client.escapeLiteral(String(v));
  await client.query('begin');
  try {
    await client.query(`set local plan_cache_mode = ${mode}`);
    await client.query(`prepare held_stmt as ${stmt.text}`);
    const r = await client.query<{ 'QUERY PLAN': string }>(`explain (costs off) execute held_stmt(${stmt.values.map(lit).join(', ')})`);
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('rollback');
    await client.query('deallocate held_stmt');
  }
}

describe('outcome statements', () => {
  it('reach the jobs a worker holds by primary key while the statistics show few running jobs, and hold no attempt partition', async () => {
    await db.pool.query('truncate job_queue, job_history, job_attempts');
    await enqueueJobs(
      db.pool,
      Array.from({ length: 3000 }, (_, i) => ({ type: 't', payload: { n: i }, maxAttempts: 3 })),
      CH,
    );
    // Statistics taken while nothing runs: the planner believes job_queue_running_idx holds next to nothing.
    await db.pool.query('analyze job_queue');
    const held: ClaimedJob[] = await claimJobs(db.pool, { workerId: 'w1', limit: 600, leaseMs: 60_000 });
    expect(held).toHaveLength(600);
    const batch = held.slice(0, 8).map((j) => ({ id: j.id, leaseToken: j.leaseToken }));

    const cap = capture();
    await completeJobs(
      cap,
      batch.map((leased) => ({ leased, attempt: attempt(3) })),
    );
    await renewLeases(cap, batch, 60_000);
    await releaseJobs(
      cap,
      batch.map((leased) => ({ leased, delayMs: 0, attempt: attempt(3) })),
    );
    const fail = capture();
    // failJobs runs in a transaction of its own: record its statement through a pool-like stand-in.
    const fakePool = { connect: async () => ({ ...fail, release: () => undefined }), query: fail.query } as unknown as pg.Pool;
    await failJobs(
      fakePool,
      batch.map((leased) => ({ leased, error: 'x', dead: false, reason: 'max_attempts' as const, delayMs: 0, attempt: attempt(3) })),
    );
    // The fail statement's plan holds the attempt partitions on purpose: a job going dead takes its
    // earlier attempts into the dead set (KEEP_ATTEMPTS).
    const statements = [
      ...cap.seen.map((s) => ({ ...s, partitionsFree: true })),
      ...fail.seen.filter((s) => /job_queue/.test(s.text)).map((s) => ({ ...s, partitionsFree: false })),
    ];
    expect(statements).toHaveLength(4);

    const client = await db.pool.connect();
    try {
      for (const stmt of statements) {
        for (const mode of ['force_generic_plan', 'force_custom_plan']) {
          const plan = await planOf(client, stmt, mode);
          expect(plan, `${mode}:\n${plan}`).toContain('job_queue_pkey');
          expect(plan, `${mode}:\n${plan}`).not.toContain('job_queue_running_idx');
          expect(stmt.partitionsFree && /job_attempts_(completed|dead)_p\d/.test(plan), `${mode}:\n${plan}`).toBe(false);
        }
      }
    } finally {
      client.release();
    }
  });

  it('counts attempt durations into the buckets durationBucket gives', async () => {
    await db.pool.query('truncate job_queue, job_history, job_attempts, delivery_stats');
    const durations = [0, 0.4, 1, 2, 3, 6, 7, 8, 100, 1023, 1024, 65_534, 131_070, 131_071, 500_000];
    await enqueueJobs(
      db.pool,
      durations.map((_, i) => ({ type: 't', payload: { n: i }, maxAttempts: 3, endpoint: 'e1' })),
      CH,
    );
    const held = await claimJobs(db.pool, { workerId: 'w1', limit: durations.length, leaseMs: 60_000 });
    expect(held).toHaveLength(durations.length);
    await completeJobs(
      db.pool,
      held.map((j, i) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, attempt: attempt(durations[i]!) })),
    );
    const want = Array.from({ length: DURATION_BUCKETS }, () => 0);
    for (const d of durations) want[durationBucket(d)]!++;
    const { rows } = await db.pool.query<{ buckets: number[] }>(
      `select array(select sum(n)::int from delivery_stats, unnest(buckets) with ordinality u(n, k) group by k order by k) as buckets`,
    );
    expect(rows[0]!.buckets).toEqual(want);
  });
});
