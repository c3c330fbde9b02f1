import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createHttpServer, listenHttp } from '../../src/http/server.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProxy } from '../helpers/proxy.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, makeUser, metricValue, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
let rx: Receiver;
const apis: Api[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  await db.drop();
});
afterEach(async () => {
  await Promise.all(apis.splice(0).map((a) => a.close()));
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users, runner_state cascade',
  );
  rx.setResponder(() => ({ status: 200, body: 'ok' }));
  rx.requests.splice(0);
});

async function api(over: Record<string, unknown> = {}, mode: 'serve' | 'worker' = 'serve', extra = {}): Promise<Api> {
  const a = await startApi(
    db,
    { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'], timeout: '30s' } }, ...over },
    mode,
    extra,
  );
  apis.push(a);
  return a;
}
const jobLabels = (topic: string) => ({ type: 'webhook.deliver', topic });
const scrape = async (a: Api) => {
  const res = await call(a.url, 'GET', '/metrics');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text;
};

describe('/metrics', () => {
  it('moves with the work: enqueued, completed, dead, deliveries by status class, durations', async () => {
    const a = await api();
    const token = await makeUser(db.pool, 'billing', 'service');
    rx.setResponder((req) => (JSON.parse(req.body.toString()).topic === 'orders.lost' ? { status: 410 } : { status: 200 }));
    for (const topic of ['orders.paid', 'orders.paid', 'orders.lost']) {
      expect((await call(a.url, 'POST', '/v1/notify', { token, body: { topic, data: {} } })).status).toBe(202);
    }
    await waitFor(async () => (await db.pool.query(`select 1 from jobs where status in ('completed', 'dead')`)).rows.length === 3);
    const text = await waitFor(async () => {
      const t = await scrape(a);
      return metricValue(t, 'acw_jobs_dead_total', { type: 'webhook.deliver', topic: 'orders.lost' }) === 1 ? t : null;
    });
    expect(metricValue(text, 'acw_jobs_enqueued_total', jobLabels('orders.paid'))).toBe(2);
    expect(metricValue(text, 'acw_jobs_completed_total', jobLabels('orders.paid'))).toBe(2);
    expect(metricValue(text, 'acw_webhook_deliveries_total', { endpoint: 'default', status_class: '2xx' })).toBe(2);
    expect(metricValue(text, 'acw_webhook_deliveries_total', { endpoint: 'default', status_class: '4xx' })).toBe(1);
    expect(metricValue(text, 'acw_webhook_delivery_duration_seconds_count', { endpoint: 'default' })).toBe(3);
    expect(metricValue(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });

  it('counts retries, reaped jobs and runner errors', async () => {
    let n = 0;
    rx.setResponder(() => ({ status: ++n === 1 ? 503 : 200 }));
    const boom = { name: 'boom', intervalMs: 50, cluster: false, run: async () => Promise.reject(new Error('boom')) };
    const a = await api({}, 'serve', { runners: [boom] });
    const token = await makeUser(db.pool, 'billing', 'service');
    await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'orders.paid', data: {} } });
    await db.pool.query(
      `insert into jobs (type, payload, status, attempts, locked_by, lease_token, lease_expires_at)
       values ('webhook.deliver', '{"topic":"x.y","body":"{}"}', 'running', 1, 'gone:1:x', gen_random_uuid(), now() - interval '1 minute')`,
    );
    const text = await waitFor(async () => {
      const t = await scrape(a);
      const ok =
        metricValue(t, 'acw_jobs_retried_total', { type: 'webhook.deliver', topic: 'orders.paid' }) === 1 &&
        metricValue(t, 'acw_jobs_reaped_total', { status: 'pending' }) === 1 &&
        (metricValue(t, 'acw_runner_errors_total', { runner: 'boom' }) ?? 0) >= 1;
      return ok ? t : null;
    });
    expect(metricValue(text, 'acw_webhook_deliveries_total', { endpoint: 'default', status_class: '5xx' })).toBe(1);
  });

  it('counts a lost lease once: the delivery it cut short as an error, and no retry', async () => {
    rx.setResponder(() => ({ hang: true }));
    // A short lease renews every 300 ms; no reaper, so nothing else touches the job.
    const a = await api({ jobs: { workers: 1, job_reaper: { enabled: false, lease_timeout: '900ms' } } });
    const token = await makeUser(db.pool, 'billing', 'service');
    await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: {} } });
    await rx.waitForRequests(1);
    // Another holder takes the lease (as a reaper and a second worker would): the next renewal fails.
    await db.pool.query(`update jobs set lease_token = gen_random_uuid() where status = 'running'`);
    await waitFor(() => a.events('job.lease_lost').length > 0);
    const text = await waitFor(async () => {
      const t = await scrape(a);
      return metricValue(t, 'acw_webhook_deliveries_total', { endpoint: 'default', status_class: 'error' }) === 1 ? t : null;
    });
    expect(metricValue(text, 'acw_job_lease_lost_total')).toBe(1);
    expect(metricValue(text, 'acw_jobs_retried_total', { type: 'webhook.deliver', topic: 'a.b' })).toBeUndefined();
    // The aborted worker wrote nothing over the new holder's row.
    expect((await db.pool.query(`select status, attempts from jobs`)).rows).toEqual([{ status: 'running', attempts: 1 }]);
  });

  it('reads queue depth and the oldest due age from the due index', async () => {
    // A type no worker handles stays pending: a queue that is not draining.
    await db.pool.query(
      `insert into jobs (type, payload, run_at) select 'nobody.handles', '{}', now() - interval '30 seconds' from generate_series(1, 3)`,
    );
    await db.pool.query(`insert into jobs (type, payload, run_at) values ('nobody.handles', '{}', now() + interval '1 hour')`);
    const a = await api();
    const text = await scrape(a);
    expect(metricValue(text, 'acw_queue_depth')).toBe(3);
    expect(metricValue(text, 'acw_queue_oldest_due_age_seconds')).toBeGreaterThanOrEqual(30);
  });
});

describe('/healthz and /readyz', () => {
  it('/healthz answers at once while every delivery slot is stuck on a hanging delivery', async () => {
    rx.setResponder(() => ({ hang: true }));
    // Deliveries have a budget of their own (not jobs.workers): two in all.
    const a = await api({
      notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'], timeout: '30s', max_in_flight: 2, max_in_flight_total: 2 } },
    });
    const token = await makeUser(db.pool, 'billing', 'service');
    for (let i = 0; i < 4; i++) await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'orders.paid', data: { i } } });
    await rx.waitForRequests(2);
    expect(a.svc.workers?.inFlight).toBe(2);
    const res = await call(a.url, 'GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
    // Answered while both deliveries still hang (they end only when the test closes the receiver).
    expect(a.svc.workers?.inFlight).toBe(2);
    expect(rx.requests).toHaveLength(2);
    expect(metricValue(await scrape(a), 'acw_jobs_in_flight')).toBe(2);
    expect((await call(a.url, 'GET', '/readyz')).status).toBe(200);
  });

  it('/readyz is a 503 naming the pending migrations on an unmigrated database, 200 once migrated', async () => {
    const fresh = await createTestDatabase({ migrated: false });
    try {
      const a = await startApi(fresh, { database: { migrate: false }, jobs: { enabled: false } }, 'worker');
      try {
        const res = await call(a.url, 'GET', '/readyz');
        expect(res.status).toBe(503);
        expect(res.body.status).toBe('not_ready');
        expect(res.body.reason).toMatch(/^migrations pending: 0001_core/);
        expect((await call(a.url, 'GET', '/healthz')).status).toBe(200);
        await migrate(fresh.pool, { schema: 'public' });
        expect((await call(a.url, 'GET', '/readyz')).status).toBe(200);
      } finally {
        await a.close();
      }
    } finally {
      await fresh.drop();
    }
  });

  it('/readyz is a 503 when the database is unreachable; /healthz stays 200', async () => {
    const { Service } = await import('../../src/service.js');
    const { createPool } = await import('../../src/db/pool.js');
    const { testConfig } = await import('../helpers/service.js');
    const url = 'postgres://postgres:password@127.0.0.1:1/none';
    const config = testConfig(db, { database: { url, migrate: false }, jobs: { enabled: false } });
    const pool = createPool({ url, size: 2, schema: 'public' });
    const svc = await Service.start({ config, database: { url, pool, schema: 'public', embedded: null, close: () => pool.end() } });
    const app = await createHttpServer(svc, { mode: 'worker' });
    const bound = await listenHttp(app, '127.0.0.1:0');
    try {
      const res = await call(bound.url, 'GET', '/readyz');
      expect(res.status).toBe(503);
      // Public: the error code, not the driver's message (which can name hosts and users).
      expect(res.body.reason).toBe('database unreachable (ECONNREFUSED)');
      expect((await call(bound.url, 'GET', '/healthz')).status).toBe(200);
      expect((await call(bound.url, 'GET', '/metrics')).status).toBe(200);
    } finally {
      await app.close();
      await svc.stop();
    }
  });

  it('worker mode serves only health, readiness and metrics', async () => {
    const a = await api({}, 'worker');
    const token = await makeUser(db.pool, 'ops', 'admin');
    expect((await call(a.url, 'GET', '/healthz')).status).toBe(200);
    expect((await call(a.url, 'GET', '/v1/jobs', { token })).status).toBe(404);
    expect((await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: 1 } })).status).toBe(404);
  });
});

describe('API routes during a database outage', () => {
  it('answer 503 unavailable with retry-after while the database is away, and work again once it is back', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    const pu = new URL(db.url);
    pu.port = String(proxy.port);
    try {
      // The service reaches the database only through the proxy, which refuses connections while cut.
      const a = await startApi(
        { ...db, url: pu.toString() },
        { jobs: { enabled: false }, notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } },
      );
      apis.push(a);
      const token = await makeUser(db.pool, 'ops', 'admin');
      expect((await call(a.url, 'GET', '/v1/jobs', { token })).status).toBe(200);
      // Away until both answers are in, however long they take.
      proxy.down();
      for (const [method, path, body] of [
        ['GET', '/v1/jobs', undefined],
        ['POST', '/v1/notify', { topic: 'a.b', data: {} }],
      ] as const) {
        const res = await call(a.url, method, path, { token, body });
        expect({ status: res.status, retryAfter: res.headers.get('retry-after'), code: res.body?.error?.code }).toEqual({
          status: 503,
          retryAfter: '1',
          code: 'unavailable',
        });
      }
      proxy.up();
      await waitFor(async () => (await call(a.url, 'GET', '/v1/jobs', { token })).status === 200, 20_000);
      expect((await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: {} } })).status).toBe(202);
    } finally {
      await Promise.all(apis.splice(0).map((x) => x.close()));
      await proxy.close();
    }
  });
});
