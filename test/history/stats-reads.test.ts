import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/pool.js';
import { deliveryHealth, EXACT_UP_TO, percentile, queueCounts } from '../../src/history/stats.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The operator reads of src/history/stats.ts (docs/architecture.md#live-jobs-and-history). GET
// /v1/stats' jobs by status: pending and dead are exact up to EXACT_UP_TO, and past it an estimate
// flagged as such, so the answer reads a bounded number of index entries however many dead jobs
// the history keeps. GET /v1/endpoints' health: duration buckets added up element-wise.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, delivery_stats');
});

/** `n` finished jobs of `status` in job_history, half today and half yesterday (two day partitions). */
async function finished(status: 'dead' | 'cancelled', n: number): Promise<void> {
  await db.pool.query(
    `insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, created_at, finished_at, series_started_at)
     select gen_random_uuid(), 'webhook.deliver', '{}', $1, 1, 6, t, t, t, t
       from generate_series(1, $2) g, lateral (select now() - (g % 2) * interval '1 day' as t) x`,
    [status, n],
  );
}

/** `n` live jobs: pending, or behind their ordering key's head. */
async function live(status: 'pending' | 'behind', n: number): Promise<void> {
  await db.pool.query(
    `insert into job_queue (id, type, payload, status, endpoint, ordering_key, ordering_seq, ordering_pos)
     select gen_random_uuid(), 'webhook.deliver', '{}', $1, 'e1', case when $1 = 'behind' then 'k' end,
            case when $1 = 'behind' then g end, case when $1 = 'behind' then g end
       from generate_series(1, $2) g`,
    [status, n],
  );
}

/**
 * Every pooled connection sends its pending table statistics now (pg_stat_force_next_flush: a
 * backend flushes them when it next goes idle, before it answers), so the cumulative counts of
 * job_queue's live rows are settled: otherwise a connection sends them within ten seconds, and
 * counts sent after an analyze are added to what it counted.
 */
async function flushStats(): Promise<void> {
  const clients = await Promise.all(Array.from({ length: Math.max(1, db.pool.totalCount) }, () => db.pool.connect()));
  try {
    for (const c of clients) await c.query('select pg_stat_force_next_flush()');
  } finally {
    for (const c of clients) c.release();
  }
}

/**
 * A Queryable that also runs each statement under EXPLAIN (ANALYZE) and adds up the rows its scans
 * of the dead set's partitions returned: what the count read, whatever plan PostgreSQL chose.
 */
function reading(): { q: Queryable; deadRows: () => number } {
  let rows = 0;
  const walk = (node: Record<string, unknown>): void => {
    const rel = node['Relation Name'];
    if (typeof rel === 'string' && rel.startsWith('job_history_dead')) rows += Number(node['Actual Rows']) * Number(node['Actual Loops']);
    for (const child of (node['Plans'] as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
  };
  const q = {
    async query(cfg: { text: string; values?: unknown[] }) {
      const plan = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown> }> }>(
        `explain (analyze, format json) ${cfg.text}`,
        cfg.values ?? [],
      );
      walk(plan.rows[0]!['QUERY PLAN'][0]!.Plan);
      return db.pool.query(cfg.text, cfg.values ?? []);
    },
  } as unknown as Queryable;
  return { q, deadRows: () => rows };
}

describe('jobs by status', () => {
  it('counts dead jobs exactly up to the cap, cancelled ones apart', async () => {
    await finished('dead', EXACT_UP_TO);
    await finished('cancelled', 300);
    const q = await queueCounts(db.pool);
    expect(q.dead).toBe(EXACT_UP_TO);
    expect(q.estimated).toBeUndefined();
  });

  it('past the cap, reads at most the cap and one more entry, and estimates the dead jobs without the cancelled ones', async () => {
    await finished('dead', 3 * EXACT_UP_TO);
    await finished('cancelled', 2 * EXACT_UP_TO);
    // Both day partitions analyzed (the sample takes every row of tables this small): the estimate is exact here.
    await db.pool.query('analyze job_history_dead');
    const { q, deadRows } = reading();
    const counts = await queueCounts(q);
    expect(counts.estimated).toEqual(['dead']);
    expect(counts.dead).toBe(3 * EXACT_UP_TO);
    expect(deadRows()).toBeGreaterThan(0);
    expect(deadRows()).toBeLessThanOrEqual(EXACT_UP_TO + 1);
  });

  it('past the cap with no statistics yet, says no less than the cap', async () => {
    await finished('dead', 2 * EXACT_UP_TO);
    const counts = await queueCounts(db.pool);
    expect(counts.estimated).toEqual(['dead']);
    expect(counts.dead).toBeGreaterThanOrEqual(EXACT_UP_TO);
  });

  it('pending and behind are each exact up to the cap, so their sum is exact past it; either past it is an estimate', async () => {
    const half = Math.ceil(0.7 * EXACT_UP_TO);
    await live('pending', half);
    await live('behind', half);
    let counts = await queueCounts(db.pool);
    expect(counts.pending).toBe(2 * half);
    expect(counts.estimated).toBeUndefined();

    await live('pending', EXACT_UP_TO - half + 100);
    await flushStats();
    await db.pool.query('analyze job_queue');
    counts = await queueCounts(db.pool);
    expect(counts.estimated).toEqual(['pending']);
    expect(counts.pending).toBe(EXACT_UP_TO + 100 + half);
  });

  it('past the cap, estimates pending jobs from the rows inserted and deleted since the last analyze', async () => {
    // 3,000 pending jobs, analyzed; then 1,600 of them leave job_queue (as finished jobs do) with no
    // analyze since: the table's row estimate still says 3,000.
    await live('pending', 3_000);
    await flushStats();
    await db.pool.query('analyze job_queue');
    await db.pool.query(`delete from job_queue where id in (select id from job_queue order by id limit 1600)`);
    await flushStats();
    const { rows } = await db.pool.query<{ n: number }>(`select reltuples::int as n from pg_class where oid = 'job_queue'::regclass`);
    expect(rows[0]!.n).toBe(3_000);
    const counts = await queueCounts(db.pool);
    expect(counts.estimated).toEqual(['pending']);
    expect(counts.pending).toBe(1_400);
  });
});

describe('endpoint health', () => {
  it('adds up the duration buckets element-wise over rows of every length, as percentile reads them', async () => {
    // Per endpoint: rows of the full length, shorter ones (older counters) and empty ones, over slots.
    const rows: Array<{ endpoint: string; ago: number; slot: number; buckets: number[] }> = [
      { endpoint: 'a', ago: 1, slot: -1, buckets: Array.from({ length: 18 }, (_, k) => (k === 3 ? 40 : k === 9 ? 5 : 0)) },
      { endpoint: 'a', ago: 1, slot: 2, buckets: Array.from({ length: 18 }, (_, k) => (k === 4 ? 30 : 0)) },
      { endpoint: 'a', ago: 5, slot: 0, buckets: [0, 0, 7, 9, 0, 3, 0, 0, 0, 2] },
      { endpoint: 'a', ago: 7, slot: 1, buckets: [] },
      { endpoint: 'b', ago: 2, slot: -1, buckets: [] },
      { endpoint: 'b', ago: 3, slot: 0, buckets: [1, 2, 3] },
    ];
    await db.pool.query(
      `insert into delivery_stats (minute, endpoint, slot, ok, failed, buckets, last_at)
       select m, x.endpoint, x.slot, 1, 0, x.buckets, m
         from json_to_recordset($1::json) as x(endpoint text, ago int, slot int, buckets int[]),
              lateral (select date_bin('1 minute', now(), timestamptz 'epoch') - x.ago * interval '1 minute' as m) t`,
      [JSON.stringify(rows)],
    );
    const health = await deliveryHealth(db.pool, ['a', 'b'], 60);
    for (const endpoint of ['a', 'b']) {
      const sum = Array.from({ length: 18 }, (_, k) =>
        rows.filter((r) => r.endpoint === endpoint).reduce((a, r) => a + (r.buckets[k] ?? 0), 0),
      );
      expect(health.get(endpoint)).toMatchObject({ p50: percentile(sum, 0.5), p99: percentile(sum, 0.99) });
    }
    // Tells the buckets apart: a's p50 lies in bucket 3 (7 to 15 ms), its p99 in bucket 9 (511 to 1,023 ms).
    expect(health.get('a')!.p50).toBeGreaterThanOrEqual(7);
    expect(health.get('a')!.p50).toBeLessThan(15);
    expect(health.get('a')!.p99).toBeGreaterThanOrEqual(511);
    expect(health.get('a')!.p99).toBeLessThan(1_023);
  });
});
