import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeGrownQueue } from '../../src/runners/queue-analyze.js';
import { claimJobs, completeJobs, enqueueJobs, renewLeases } from '../../src/queue/transitions.js';
import type { ClaimedJob } from '../../src/queue/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * The plans a connection keeps for the queue's named statements (docs/architecture.md#live-jobs-and-history):
 * a generic plan made while job_queue was small reads the whole table, and is kept after the table
 * has filled up, until job_queue is analyzed again.
 */

let db: TestDatabase;
/** One connection, as a pooled connection of the service: its named statements and their plans stay. */
let one: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  one = new pg.Pool({ connectionString: db.url, max: 1 });
});
afterAll(async () => {
  await one.end();
  await db.drop();
});

const CH = 'public.acw_jobs';
const enqueue = (n: number) =>
  enqueueJobs(
    db.pool,
    Array.from({ length: n }, (_, i) => ({ type: 't', payload: { n: i, pad: 'x'.repeat(300) }, maxAttempts: 3 })),
    CH,
  );
const lease = (j: ClaimedJob) => ({ id: j.id, leaseToken: j.leaseToken });

/** The plan `one`'s connection has for its named statement `name` with these values (what it runs next). */
async function planOf(name: string, values: unknown[]): Promise<string> {
  const c = await one.connect();
  try {
    const lit = (v: unknown): string => (Array.isArray(v) ? c.escapeLiteral(`{${v.map(String).join(',')}}`) : c.escapeLiteral(String(v)));
    const r = await c.query<{ 'QUERY PLAN': string }>(`explain (costs off) execute ${name}(${values.map(lit).join(', ')})`);
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    c.release();
  }
}

describe('job_queue analyzed as it grows', () => {
  it('has the plans a small job_queue left behind made again once it has filled up', async () => {
    await db.pool.query('truncate job_queue, job_history, job_attempts');
    // Statistics of an empty job_queue, as on a fresh database or a drained queue.
    await db.pool.query('analyze job_queue');
    expect(await analyzeGrownQueue(db.pool)).toMatchObject({ analyzed: false });

    // A quiet queue: a handful of jobs, each completed on its own, more than five times on one
    // connection: from the sixth run on, it uses a generic plan, made for a table of a page or two.
    await enqueue(8);
    const few = await claimJobs(db.pool, { workerId: 'w1', limit: 8, leaseMs: 60_000 });
    expect(few).toHaveLength(8);
    for (const j of few.slice(0, 7)) {
      expect(await completeJobs(one, [{ leased: lease(j) }])).toEqual(new Set([j.id]));
      await renewLeases(one, [lease(few[7]!)], 60_000);
    }

    // A burst: thousands of pending jobs, a few of them running.
    await enqueue(6000);
    const held = await claimJobs(db.pool, { workerId: 'w1', limit: 4, leaseMs: 60_000 });
    const ids = [held.map((j) => j.id), held.map((j) => j.leaseToken)];
    const complete = () => planOf('acw_complete', ids);
    const renew = () => planOf('acw_renew', [...ids, 60_000]);
    // The trap: the connection still reads the whole of job_queue to find four jobs.
    expect(await complete()).toMatch(/Seq Scan on job_queue/);
    expect(await renew()).toMatch(/Seq Scan on job_queue/);

    const r = await analyzeGrownQueue(db.pool);
    expect(r).toMatchObject({ analyzed: true, statsPages: 0 });
    expect(r.pages).toBeGreaterThan(100);
    // Made again for the size it has now, custom or generic: by primary key.
    for (const plan of [await complete(), await renew()]) {
      expect(plan).not.toMatch(/Seq Scan on job_queue/);
      expect(plan).toContain('job_queue_pkey');
    }
    expect(
      await completeJobs(
        one,
        held.map((j) => ({ leased: lease(j) })),
      ),
    ).toEqual(new Set(held.map((j) => j.id)));
    for (let i = 0; i < 6; i++) await renewLeases(one, [lease(few[7]!)], 60_000);
    expect(await renew()).not.toMatch(/Seq Scan on job_queue/);

    // Until it doubles again, a catalog read and nothing more.
    expect(await analyzeGrownQueue(db.pool)).toMatchObject({ analyzed: false });
  });
});
