import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { redriveJobs, retryJob } from '../../src/admin/job-actions.js';
import type { Queryable } from '../../src/db/pool.js';
import { expireHeldJobs } from '../../src/queue/transitions.js';
import { expiryInterval, sweepExpiredJobs, type ExpiryOptions } from '../../src/runners/expiry.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { startTestService } from '../helpers/service.js';

// Maximum age (docs/operations.md#maximum-age): held webhook jobs past notify.webhook.max_age go
// dead, with an audit row each but one alert and one notification per admin per endpoint per sweep.

const MAX_AGE_MS = 72 * 3600_000;
const ALERTS = 'acw_alerts_test';
const JOBS = 'acw_jobs_test';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, notifications, audit_log, users, runner_state restart identity cascade',
  );
  await db.pool.query(`insert into users (name, role) values ('ann', 'admin'), ('bob', 'admin'), ('vic', 'viewer')`);
});

/** Pending webhook jobs for `endpoint`, their series started `ageMs` ago, due `dueInMs` from now (negative: overdue). */
async function held(endpoint: string | null, n: number, ageMs: number, dueInMs = -1000, type = 'webhook.deliver'): Promise<string[]> {
  const res = await db.pool.query<{ id: string }>(
    `insert into jobs (type, payload, max_attempts, endpoint, event_id, attempts, last_error, status, run_at, series_started_at)
     select $5, jsonb_build_object('topic', 'order.created', 'n', g), 6, $1, gen_random_uuid(), 2, 'connect ECONNREFUSED',
       'pending', now() + $3 * interval '1 millisecond', now() - $2 * interval '1 millisecond'
     from generate_series(1, $4) g returning id`,
    [endpoint, ageMs, dueInMs, n, type],
  );
  return res.rows.map((r) => r.id);
}

function sweep(over: Partial<ExpiryOptions> = {}) {
  const logs = captureLogs();
  const run = sweepExpiredJobs(db.pool, { maxAgeMs: MAX_AGE_MS, alertsChannel: ALERTS, log: logs.log, ...over });
  return { run, logs };
}

async function statusOf(ids: readonly string[]): Promise<Array<{ status: string; last_error: string | null }>> {
  const res = await db.pool.query(`select status, last_error from jobs where id = any($1::uuid[])`, [ids]);
  return res.rows;
}

const count = async (sql: string, values: unknown[] = []): Promise<number> => (await db.pool.query(sql, values)).rows[0].n as number;
const auditRows = () => count(`select count(*)::int as n from audit_log`);
const notifications = () => count(`select count(*)::int as n from notifications`);

describe('expiry sweep', () => {
  it('sends held jobs past max_age to dead once, with an audit row each and one alert and notification per admin per endpoint', async () => {
    const a = await held('a', 3, MAX_AGE_MS + 3600_000);
    const b = await held('b', 2, MAX_AGE_MS + 60_000);
    const young = await held('a', 1, MAX_AGE_MS - 60_000);
    const appJob = await held(null, 1, MAX_AGE_MS * 2);
    const { run, logs } = sweep();
    const res = await run;

    expect(res).toMatchObject({ ran: true, expired: 5 });
    expect(res.endpoints.map((e) => [e.endpoint, e.count])).toEqual([
      ['a', 3],
      ['b', 2],
    ]);
    for (const j of await statusOf([...a, ...b])) expect(j).toEqual({ status: 'dead', last_error: 'endpoint unavailable' });
    expect(await statusOf([...young, ...appJob])).toEqual([
      { status: 'pending', last_error: 'connect ECONNREFUSED' },
      { status: 'pending', last_error: 'connect ECONNREFUSED' },
    ]);

    const perJob = await db.pool.query(`select target_id, details from audit_log where action = 'webhook.expired' order by target_id`);
    expect(perJob.rows.map((r) => r.target_id)).toEqual([...a, ...b].toSorted());
    expect(perJob.rows[0].details).toMatchObject({
      type: 'webhook.deliver',
      topic: 'order.created',
      attempts: 2,
      reason: 'max_age',
      last_error: 'endpoint unavailable',
    });
    for (const r of perJob.rows) {
      expect(r.details.job_id).toBe(r.target_id);
      expect(r.details.event_id).toEqual(expect.any(String));
    }

    const alerts = await db.pool.query(`select target_id, details from audit_log where action = 'endpoint.expired' order by target_id`);
    expect(alerts.rows.map((r) => [r.target_id, r.details.count, r.details.endpoint])).toEqual([
      ['a', 3, 'a'],
      ['b', 2, 'b'],
    ]);
    expect(alerts.rows[0].details.reason).toBe('endpoint unavailable');
    expect(Date.parse(alerts.rows[0].details.oldest_series_started_at)).toBeGreaterThan(0);
    // Every audit row is either a job's or an endpoint's: nothing else went to audit_log.
    expect(await auditRows()).toBe(5 + 2);

    // One per admin per endpoint, none per job, none for a viewer.
    const notes = await db.pool.query(
      `select u.name, n.topic, n.data->>'endpoint' as endpoint, (n.data->>'count')::int as count
       from notifications n join users u on u.id = n.user_id order by u.name, endpoint`,
    );
    expect(notes.rows).toEqual([
      { name: 'ann', topic: 'endpoint.expired', endpoint: 'a', count: 3 },
      { name: 'ann', topic: 'endpoint.expired', endpoint: 'b', count: 2 },
      { name: 'bob', topic: 'endpoint.expired', endpoint: 'a', count: 3 },
      { name: 'bob', topic: 'endpoint.expired', endpoint: 'b', count: 2 },
    ]);

    expect(logs.events('endpoint.expired').map((l) => [l.endpoint, l.count])).toEqual([
      ['a', 3],
      ['b', 2],
    ]);

    // The next sweep finds nothing: no change, no row, no line.
    const again = sweep();
    expect(await again.run).toEqual({ ran: true, expired: 0, endpoints: [] });
    expect(await auditRows()).toBe(7);
    expect(await notifications()).toBe(4);
    expect(again.logs.events('endpoint.expired')).toEqual([]);
    expect(await statusOf(young)).toEqual([{ status: 'pending', last_error: 'connect ECONNREFUSED' }]);
  });

  it('leaves a job not yet due to its own back-off, and expires it once it is due', async () => {
    const waiting = await held('a', 1, MAX_AGE_MS + 3600_000, 60_000);
    expect((await sweep().run).expired).toBe(0);
    expect(await statusOf(waiting)).toEqual([{ status: 'pending', last_error: 'connect ECONNREFUSED' }]);
    await db.pool.query(`update jobs set run_at = now() - interval '1 second' where id = $1`, [waiting[0]]);
    expect((await sweep().run).expired).toBe(1);
  });

  it('a retried or redriven job starts a new series and is not expired', async () => {
    const retried = await held('a', 1, MAX_AGE_MS + 3600_000);
    const redriven = await held('b', 2, MAX_AGE_MS + 3600_000);
    const untouched = await held('c', 1, MAX_AGE_MS + 3600_000);
    // Dead in an old series (the last attempt long ago), then moved back by an operator.
    await db.pool.query(`update jobs set status = 'dead', updated_at = now() where id = any($1::uuid[])`, [[...retried, ...redriven]]);
    await retryJob(db.pool, retried[0]!, 'ops', JOBS);
    expect(await redriveJobs(db.pool, { status: 'dead', endpoint: 'b' }, 'ops', JOBS)).toEqual({ count: 2 });
    const res = await sweep().run;
    expect(res.endpoints.map((e) => [e.endpoint, e.count])).toEqual([['c', 1]]);
    expect((await statusOf([...retried, ...redriven])).map((j) => j.status)).toEqual(['pending', 'pending', 'pending']);
    expect(await statusOf(untouched)).toEqual([{ status: 'dead', last_error: 'endpoint unavailable' }]);
    const series = await count(
      `select count(*)::int as n from jobs where id = any($1::uuid[]) and series_started_at >= now() - interval '1 minute'`,
      [[...retried, ...redriven]],
    );
    expect(series).toBe(3);
  });

  it('walks a backlog in batches within one sweep, and one alert per endpoint covers them all', async () => {
    await held('a', 25, MAX_AGE_MS + 3600_000);
    await held('b', 12, MAX_AGE_MS + 3600_000);
    const res = await sweep({ batch: 4 }).run;
    expect(res.expired).toBe(37);
    expect(await count(`select count(*)::int as n from audit_log where action = 'webhook.expired'`)).toBe(37);
    expect(await count(`select count(*)::int as n from audit_log where action = 'endpoint.expired'`)).toBe(2);
    expect(await count(`select count(*)::int as n from jobs where status = 'pending'`)).toBe(0);
  });

  it('stops at the cap of a sweep; the next sweep takes the rest with alerts of its own', async () => {
    await held('a', 10, MAX_AGE_MS + 3600_000);
    expect((await sweep({ batch: 3, maxPerSweep: 7 }).run).endpoints).toEqual([expect.objectContaining({ endpoint: 'a', count: 7 })]);
    expect((await sweep({ batch: 3, maxPerSweep: 7 }).run).endpoints).toEqual([expect.objectContaining({ endpoint: 'a', count: 3 })]);
    expect(await count(`select count(*)::int as n from audit_log where action = 'webhook.expired'`)).toBe(10);
  });

  it('skips a job another transaction holds (a claim in progress) instead of waiting for it', async () => {
    const ids = await held('a', 3, MAX_AGE_MS + 3600_000);
    const other = await db.pool.connect();
    try {
      await other.query('begin');
      await other.query(`select id from job_queue where id = $1 for update`, [ids[0]]);
      const res = await sweep().run;
      expect(res.expired).toBe(2);
      await other.query('rollback');
    } finally {
      other.release();
    }
    expect((await sweep().run).expired).toBe(1);
    expect(await count(`select count(*)::int as n from audit_log where action = 'endpoint.expired'`)).toBe(2);
  });

  it('two sweeps at once expire each job once and alert once per endpoint', async () => {
    const ids = [...(await held('a', 60, MAX_AGE_MS + 3600_000)), ...(await held('b', 40, MAX_AGE_MS + 3600_000))];
    // Separate pools, as two processes would have.
    const pools = [new pg.Pool({ connectionString: db.url, max: 2 }), new pg.Pool({ connectionString: db.url, max: 2 })];
    try {
      const results = await Promise.all(
        pools.map((p) => sweepExpiredJobs(p, { maxAgeMs: MAX_AGE_MS, alertsChannel: ALERTS, log: captureLogs().log, batch: 5 })),
      );
      expect(results.reduce((s, r) => s + r.expired, 0)).toBe(100);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const perJob = await db.pool.query(`select target_id from audit_log where action = 'webhook.expired'`);
    expect(perJob.rows.map((r) => r.target_id).toSorted()).toEqual(ids.toSorted());
    const alerts = await db.pool.query(
      `select target_id, sum((details->>'count')::int)::int as n, count(*)::int as alerts from audit_log
       where action = 'endpoint.expired' group by target_id order by target_id`,
    );
    expect(alerts.rows).toEqual([
      { target_id: 'a', n: 60, alerts: 1 },
      { target_id: 'b', n: 40, alerts: 1 },
    ]);
    expect(await notifications()).toBe(4);
  });

  it('a sweep that finds another one running changes nothing', async () => {
    await held('a', 2, MAX_AGE_MS + 3600_000);
    const other = await db.pool.connect();
    try {
      await other.query('begin');
      await other.query(`select pg_advisory_xact_lock($1, hashtext(current_schema()))`, [0x61637765]);
      expect(await sweep().run).toEqual({ ran: false, expired: 0, endpoints: [] });
      await other.query('rollback');
    } finally {
      other.release();
    }
    expect(await auditRows()).toBe(0);
    expect((await sweep().run).expired).toBe(2);
  });

  it('reads pages of the due index, never the whole table, behind a big young backlog', async () => {
    // A held backlog of young jobs ahead of nothing old, and finished rows: filtering on the age in
    // the index scan made the planner prefer a sequential scan here.
    await db.pool.query(
      `insert into job_queue (id, type, payload, max_attempts, status, endpoint, run_at, series_started_at)
       select gen_random_uuid(), 'webhook.deliver', '{}', 6, 'pending', 'ep' || (g % 7), now() - (g % 1000) * interval '1 second',
         now() - interval '1 hour'
       from generate_series(1, 30000) g`,
    );
    await db.pool.query(
      `insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, created_at, finished_at, endpoint, series_started_at)
       select gen_random_uuid(), 'webhook.deliver', '{}', 'completed', 1, 6, now(), now(), now(), 'ep' || (g % 7), now() - interval '1 hour'
       from generate_series(1, 30000) g`,
    );
    await held('a', 20, MAX_AGE_MS + 3600_000, -3600_000);
    await db.pool.query('analyze job_queue');
    // The statement as the sweep sends it, recorded from a rolled-back run, then explained.
    const client = await db.pool.connect();
    try {
      const seen: Array<{ text: string; values: unknown[] }> = [];
      const recorder = {
        query: async (text: string, values: unknown[]) => {
          seen.push({ text, values });
          return client.query(text, values);
        },
      } as unknown as Queryable;
      await client.query('begin');
      const page = await expireHeldJobs(recorder, { maxAgeMs: MAX_AGE_MS, batch: 1000 });
      await client.query('rollback');
      expect(page.rows).toHaveLength(20);
      expect(page.next).not.toBeNull();
      expect(seen).toHaveLength(1);
      const plan = await client.query(`explain (format json) ${seen[0]!.text}`, seen[0]!.values);
      const json = JSON.stringify(plan.rows[0]['QUERY PLAN']);
      expect(json).toContain('"Index Name":"job_queue_due_idx"');
      expect(json).not.toContain('Seq Scan');
    } finally {
      client.release();
    }
    // The whole sweep walks the backlog page by page: old jobs due last, behind 30,000 young ones, are found.
    await db.pool.query(`update jobs set run_at = now() where endpoint = 'a'`);
    expect((await sweep().run).endpoints).toEqual([expect.objectContaining({ endpoint: 'a', count: 20 })]);
  });
});

describe('the service', () => {
  it('runs the sweep on its schedule with the configured max_age, and counts the jobs as dead', async () => {
    // A type no handler of the service claims, so only the sweep can move it.
    const [id] = await held('a', 1, 2 * 3600_000, -1000, 'test.held');
    const { svc, events } = await startTestService(db, { notify: { webhook: { max_age: '1h' } } });
    try {
      await waitFor(async () => (await statusOf([id!]))[0]?.status === 'dead', 15_000);
      expect(await statusOf([id!])).toEqual([{ status: 'dead', last_error: 'endpoint unavailable' }]);
      await waitFor(() => events('endpoint.expired').length > 0);
      expect(events('endpoint.expired')).toEqual([expect.objectContaining({ endpoint: 'a', count: 1, runner: 'job_expiry' })]);
      expect(await svc.metrics.registry.metrics()).toMatch(/acw_jobs_dead_total\{type="test.held",topic="order.created"\} 1/);
    } finally {
      await svc.stop();
    }
  });
});

describe('expiry interval', () => {
  it('is a minute, or a tenth of a short max_age, never under a second', () => {
    expect(expiryInterval(72 * 3600_000)).toBe(60_000);
    expect(expiryInterval(5 * 60_000)).toBe(30_000);
    expect(expiryInterval(2_000)).toBe(1_000);
  });
});
