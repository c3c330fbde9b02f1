import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJob, listJobs } from '../../src/admin/jobs.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The history and backlog scenarios load their templates with bench/lib/history-data.mjs, set-based
// SQL straight into the tables of the history layout. What they measure is only worth something if
// those rows are what the service itself leaves: each delivery an event, a finished job with its
// one attempt, the counters the operator reads add up, a dead letter per dead job.
const BENCH = join(fileURLToPath(new URL('../../', import.meta.url)), 'bench');

interface Loader {
  loadFinished(db: pg.ClientBase, spec: Record<string, unknown>): Promise<string>;
  HISTORY_DEAD_EVERY: number;
}

const DAY_MS = 86_400_000;
const ROWS = 3000;

describe('bench/lib/history-data.mjs on the history layout', () => {
  let db: TestDatabase;
  let fromMs: number;
  let layout: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    const loader = (await import(pathToFileURL(join(BENCH, 'lib/history-data.mjs')).href)) as Loader;
    const c = await db.pool.connect();
    try {
      // Three whole UTC days ending at today's midnight: how much of today has passed must not
      // change how many day partitions the rows fill.
      const toMs = Math.floor(Date.now() / DAY_MS) * DAY_MS;
      fromMs = toMs - 3 * DAY_MS;
      layout = await loader.loadFinished(c, { rows: ROWS, fromMs, toMs, deadEvery: loader.HISTORY_DEAD_EVERY, batch: 1000 });
    } finally {
      c.release();
    }
  }, 120_000);

  afterAll(async () => {
    await db?.drop();
  });

  it('writes each delivery as an event, a finished job and its one attempt, in the day partitions of its time', async () => {
    expect(layout).toBe('history');
    const r = await db.pool.query(`select
        (select count(*)::int from job_history) as jobs,
        (select count(*)::int from job_history where status = 'dead') as dead,
        (select count(*)::int from job_history h join events e on e.id = h.event_id) as with_event,
        (select count(*)::int from job_history h join job_attempts a on a.job_id = h.id and a.dead = (h.status = 'dead')) as with_attempt,
        (select count(*)::int from job_attempts) as attempts,
        (select count(*)::int from events) as events,
        (select count(*)::int from job_history where left(replace(id::text, '-', ''), 12) = left(replace(event_id::text, '-', ''), 12)
           and substr(id::text, 15, 1) = '8' and substr(event_id::text, 15, 1) = '7') as time_ordered_ids,
        (select count(distinct tableoid)::int from job_history) as partitions,
        (select min(created_at) from events) as first, (select max(created_at) from events) as last`);
    const x = r.rows[0];
    expect(x).toMatchObject({
      jobs: ROWS,
      dead: ROWS / 50,
      with_event: ROWS,
      with_attempt: ROWS,
      attempts: ROWS,
      events: ROWS,
      time_ordered_ids: ROWS,
    });
    // Three whole days, partitioned by status set (completed, dead) and day.
    expect(x.partitions).toBe(6);
    expect(x.first.getTime()).toBeGreaterThanOrEqual(fromMs);
    expect(x.last.getTime()).toBeLessThanOrEqual(Date.now());
  });

  it('keeps the counters the operator reads in step with the rows, and a dead letter per dead job', async () => {
    const r = await db.pool.query(`select
        (select sum(ok)::int from delivery_stats) as ok, (select sum(failed)::int from delivery_stats) as failed,
        (select sum(permanent)::int from delivery_stats) as permanent,
        (select sum(b)::int from delivery_stats, unnest(buckets) b) as bucketed,
        (select sum(completed)::int from job_counts) as completed, (select sum(dead)::int from job_counts) as dead_counted,
        (select count(*)::int from audit_log a join job_history h on h.id::text = a.target_id
          where a.action = 'webhook.dead_letter' and h.status = 'dead') as dead_letters`);
    expect(r.rows[0]).toEqual({
      ok: ROWS - ROWS / 50,
      failed: ROWS / 50,
      permanent: ROWS / 50,
      bucketed: ROWS,
      completed: ROWS - ROWS / 50,
      dead_counted: ROWS / 50,
      dead_letters: ROWS / 50,
    });
  });

  it('is read back by the service as finished jobs with their attempts', async () => {
    const dead = await listJobs(db.pool, { status: 'dead', limit: 5 });
    expect(dead.items).toHaveLength(5);
    const job = await getJob(db.pool, dead.items[0]!.id);
    expect(job).toMatchObject({ status: 'dead', attempts: 1, last_error: 'HTTP 410' });
    expect(job!.deliveries).toMatchObject([{ attempt: 1, status_code: 410, error_kind: 'http_status' }]);
    // Written as the service writes it: no body kept with the job, the one it sent made from its event.
    const kept = await db.pool.query(`select count(*)::int as n from job_history where payload ? 'body'`);
    expect(kept.rows[0]).toEqual({ n: 0 });
    const sent = JSON.parse((job!.payload as { body: string }).body);
    expect(sent).toMatchObject({ event_id: job!.event_id, topic: job!.topic, data: { seq: expect.any(Number) } });
    const page = await listJobs(db.pool, { topic: 'order.refunded', endpoint: 'e003', limit: 500 });
    expect(page.items.length).toBeGreaterThan(0);
    expect(page.items.every((j) => j.status === 'completed' || j.status === 'dead')).toBe(true);
  });
});
