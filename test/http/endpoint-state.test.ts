import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../src/db/sql.js';
import { call, makeUser, metricValue, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

// Pause, resume, probe now and the endpoint view (docs/operations.md#pausing-an-endpoint). The main
// service runs no workers (jobs.enabled: false), so held jobs stay put and nothing is delivered.
let db: TestDatabase;
let api: Api;
let admin: string;
let viewer: string;
let listener: pg.Client;
const notified: string[] = [];

const webhook = {
  url: 'http://127.0.0.1:9/default',
  secret: 'default-secret-0123',
  topics: ['a.*'],
  endpoints: [{ name: 'crm', url: 'http://127.0.0.1:9/crm', secret: 'crm-secret-4567', topics: ['crm.*'], rate_limit: '600/min' }],
};

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db, { jobs: { enabled: false }, notify: { webhook } });
  admin = await makeUser(db.pool, 'ops', 'admin');
  viewer = await makeUser(db.pool, 'eve', 'viewer');
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (m) => notified.push(m.payload ?? ''));
  await listener.query(`listen ${quoteIdent(api.svc.channels.endpoints)}`);
});
afterAll(async () => {
  await listener.end();
  await api.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, endpoint_state cascade',
  );
  notified.length = 0;
});

const post = (path: string, token = admin) => call(api.url, 'POST', path, { token });
const get = (path: string, token = admin) => call(api.url, 'GET', path, { token });
const stateRow = async (name: string) => (await db.pool.query(`select * from endpoint_state where endpoint = $1`, [name])).rows[0];
const audit = async (action: string) =>
  (await db.pool.query(`select actor, target_type, target_id, details from audit_log where action = $1 order by id`, [action])).rows;
/** Every table a request could write, endpoint_state included. */
const counts = async () => ({
  ...(await rowCounts(db.pool)),
  endpoint_state: (await db.pool.query(`select count(*)::int as n from endpoint_state`)).rows[0].n as number,
});
/** A NOTIFY sent by a committed change arrives; a round trip on the listener flushes any that would. */
const notifiesSettled = () => listener.query('select 1');

async function openCircuit(name: string, probeIn = '1 hour'): Promise<void> {
  await db.pool.query(
    `insert into endpoint_state (endpoint, circuit, circuit_since, opened_at, next_probe_at, consecutive_failures, last_error, last_error_at)
     values ($1, 'open', now() - interval '1 minute', now() - interval '1 minute', now() + $2::interval, 10, 'connect ECONNREFUSED', now())`,
    [name, probeIn],
  );
}

async function dueJobs(endpoint: string, n: number): Promise<void> {
  await db.pool.query(
    `insert into jobs (type, payload, endpoint, run_at)
     select 'webhook.deliver', '{"topic":"crm.x","body":"{}"}', $1, now() - interval '1 second' from generate_series(1, $2)`,
    [endpoint, n],
  );
}

describe('pause and resume', () => {
  it('pause writes the row, one audit row, a NOTIFY and a log line; pausing again writes nothing', async () => {
    const res = await post('/v1/endpoints/crm/pause');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'crm', paused: true, paused_by: 'ops', changed: true, circuit: { state: 'closed' } });
    expect(Date.parse(res.body.paused_at)).not.toBeNaN();
    const row = await stateRow('crm');
    expect(row).toMatchObject({ paused: true, paused_by: 'ops', circuit: 'closed' });
    expect(await audit('endpoint.paused')).toEqual([
      { actor: 'ops', target_type: 'endpoint', target_id: 'crm', details: { circuit: 'closed' } },
    ]);
    await waitFor(() => notified.includes('crm'));
    expect(api.events('endpoint.paused').at(-1)).toMatchObject({ endpoint: 'crm', actor: 'ops' });

    const before = await counts();
    const again = await post('/v1/endpoints/crm/pause');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ paused: true, paused_at: res.body.paused_at, changed: false });
    await notifiesSettled();
    expect(notified).toEqual(['crm']);
    expect(await counts()).toEqual(before);
    expect((await stateRow('crm')).updated_at).toEqual(row.updated_at);
    expect(await audit('endpoint.paused')).toHaveLength(1);
  });

  it('resume clears the pause, audited and announced', async () => {
    await post('/v1/endpoints/crm/pause');
    const res = await post('/v1/endpoints/crm/resume');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'crm', paused: false, paused_at: null, paused_by: null, changed: true });
    expect(await stateRow('crm')).toMatchObject({ paused: false, paused_at: null, paused_by: null });
    expect(await audit('endpoint.resumed')).toEqual([
      { actor: 'ops', target_type: 'endpoint', target_id: 'crm', details: { was_paused: true, circuit: 'closed', probe_now: false } },
    ]);
    await waitFor(() => notified.filter((n) => n === 'crm').length === 2);
    expect(api.events('endpoint.resumed').at(-1)).toMatchObject({ endpoint: 'crm', actor: 'ops', was_paused: true });
  });

  it('resume on an open circuit sets its next probe to now, paused or not', async () => {
    await openCircuit('default');
    const res = await post('/v1/endpoints/default/resume');
    expect(res.status).toBe(200);
    expect(res.body.changed).toBe(true);
    const due = await db.pool.query(`select circuit, next_probe_at <= now() as due from endpoint_state where endpoint = 'default'`);
    expect(due.rows).toEqual([{ circuit: 'open', due: true }]);
    expect(Date.parse(res.body.circuit.next_probe_at)).toBeLessThanOrEqual(Date.now() + 1_000);
    expect(await audit('endpoint.resumed')).toEqual([
      { actor: 'ops', target_type: 'endpoint', target_id: 'default', details: { was_paused: false, circuit: 'open', probe_now: true } },
    ]);
    await waitFor(() => notified.includes('default'));
  });

  it('resume with nothing to do (not paused, circuit closed or already due) writes nothing', async () => {
    await openCircuit('default', '-1 second');
    const before = await counts();
    for (const name of ['crm', 'default']) {
      const res = await post(`/v1/endpoints/${name}/resume`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ name, paused: false, changed: false });
    }
    await notifiesSettled();
    expect(notified).toEqual([]);
    expect(await counts()).toEqual(before);
  });

  it('pause and resume are admin only; a viewer reads the view', async () => {
    const before = await counts();
    for (const action of ['pause', 'resume', 'test']) expect((await post(`/v1/endpoints/crm/${action}`, viewer)).status).toBe(403);
    expect((await call(api.url, 'POST', '/v1/endpoints/crm/pause')).status).toBe(401);
    expect(await counts()).toEqual(before);
    expect((await get('/v1/endpoints', viewer)).status).toBe(200);
  });

  it('an unknown endpoint is a 404 naming name and writes nothing; so is a body', async () => {
    await openCircuit('default');
    const before = await counts();
    for (const action of ['pause', 'resume', 'test']) {
      const res = await post(`/v1/endpoints/nope/${action}`);
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'not_found', details: { field: 'name' } });
      expect(res.body.error.message).toMatch(/^name: .*"nope"/);
    }
    const body = await call(api.url, 'POST', '/v1/endpoints/crm/pause', { token: admin, body: { paused: true } });
    expect(body.status).toBe(400);
    expect(body.body.error.details.field).toBe('paused');
    await notifiesSettled();
    expect(notified).toEqual([]);
    expect(await counts()).toEqual(before);
  });
});

describe('POST /v1/endpoints/:name/test', () => {
  it('refuses a paused endpoint with 409 endpoint_paused and writes nothing', async () => {
    await post('/v1/endpoints/crm/pause');
    await notifiesSettled();
    notified.length = 0;
    const before = await counts();
    const res = await post('/v1/endpoints/crm/test');
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'endpoint_paused', details: { field: 'name' } });
    expect(res.body.error.message).toContain('/v1/endpoints/crm/resume');
    await notifiesSettled();
    expect(notified).toEqual([]);
    expect(await counts()).toEqual(before);
  });

  it('on an open circuit makes the probe due now, in the transaction of the test event', async () => {
    await openCircuit('default');
    const res = await post('/v1/endpoints/default/test');
    expect(res.status).toBe(202);
    expect(res.body.job_ids).toHaveLength(1);
    const due = await db.pool.query(`select next_probe_at <= now() as due from endpoint_state where endpoint = 'default'`);
    expect(due.rows).toEqual([{ due: true }]);
    expect(await audit('endpoint.test')).toEqual([
      { actor: 'ops', target_type: 'endpoint', target_id: 'default', details: { ...res.body, probe_now: true } },
    ]);
    await waitFor(() => notified.includes('default'));
  });

  it('on a closed endpoint leaves its state alone', async () => {
    const res = await post('/v1/endpoints/crm/test');
    expect(res.status).toBe(202);
    expect(await stateRow('crm')).toBeUndefined();
    expect(await audit('endpoint.test')).toEqual([{ actor: 'ops', target_type: 'endpoint', target_id: 'crm', details: res.body }]);
  });
});

describe('GET /v1/endpoints and /metrics', () => {
  it('shows each endpoint circuit, pause, rate limit and held jobs; never a secret', async () => {
    await openCircuit('default');
    await post('/v1/endpoints/crm/pause');
    await dueJobs('crm', 3);
    await dueJobs('default', 2);
    // Not held: not yet due.
    await db.pool.query(
      `insert into jobs (type, payload, endpoint, run_at) values ('webhook.deliver', '{}', 'crm', now() + interval '1 hour')`,
    );

    const res = await get('/v1/endpoints', viewer);
    expect(res.status).toBe(200);
    const [def, crm] = res.body.items;
    expect(def).toMatchObject({
      name: 'default',
      paused: false,
      paused_at: null,
      paused_by: null,
      circuit: { state: 'open', consecutive_failures: 10, last_error: 'connect ECONNREFUSED' },
      rate_limit: null,
      adaptive_limit: 16,
      in_flight: null,
      held_jobs: 2,
    });
    for (const k of ['since', 'opened_at', 'next_probe_at', 'last_error_at']) expect(Date.parse(def.circuit[k])).not.toBeNaN();
    expect(crm).toMatchObject({
      name: 'crm',
      paused: true,
      paused_by: 'ops',
      circuit: {
        state: 'closed',
        since: expect.any(String),
        opened_at: null,
        next_probe_at: null,
        consecutive_failures: 0,
        last_error: null,
        last_error_at: null,
      },
      rate_limit: 10,
      held_jobs: 3,
    });
    expect(res.text).not.toContain('secret-');

    // A closed, unpaused endpoint with due jobs holds none: they are just queued.
    await post('/v1/endpoints/crm/resume');
    await db.pool.query(`delete from endpoint_state where endpoint = 'default'`);
    const after = (await get('/v1/endpoints')).body.items;
    expect(after.map((e: { held_jobs: number }) => e.held_jobs)).toEqual([0, 0]);
    expect(after[0].circuit).toEqual({
      state: 'closed',
      since: null,
      opened_at: null,
      next_probe_at: null,
      consecutive_failures: 0,
      last_error: null,
      last_error_at: null,
    });
  });

  it('metrics: circuit state as a state set, paused, failing and held jobs per endpoint', async () => {
    await openCircuit('default');
    await post('/v1/endpoints/crm/pause');
    // As the failing judge leaves it (docs/operations.md#failing-endpoints).
    await db.pool.query(
      `update endpoint_state set failing = true, failing_since = now(), failing_codes = '{422}', updated_at = now() where endpoint = 'crm'`,
    );
    await dueJobs('crm', 4);
    // Scrapes share one read per second: wait for one that sees this test's rows.
    const text = await waitFor(async () => {
      const t = (await call(api.url, 'GET', '/metrics')).text;
      return metricValue(t, 'acw_endpoint_held_jobs', { endpoint: 'crm' }) === 4 ? t : null;
    });
    const state = (endpoint: string, s: string) => metricValue(text, 'acw_endpoint_circuit_state', { endpoint, state: s });
    expect([state('default', 'open'), state('default', 'half_open'), state('default', 'closed')]).toEqual([1, 0, 0]);
    expect([state('crm', 'open'), state('crm', 'half_open'), state('crm', 'closed')]).toEqual([0, 0, 1]);
    expect(metricValue(text, 'acw_endpoint_paused', { endpoint: 'crm' })).toBe(1);
    expect(metricValue(text, 'acw_endpoint_paused', { endpoint: 'default' })).toBe(0);
    expect(metricValue(text, 'acw_endpoint_failing', { endpoint: 'crm' })).toBe(1);
    expect(metricValue(text, 'acw_endpoint_failing', { endpoint: 'default' })).toBe(0);
    expect(metricValue(text, 'acw_endpoint_held_jobs', { endpoint: 'default' })).toBe(0);
    expect(metricValue(text, 'acw_endpoint_in_flight', { endpoint: 'crm' })).toBe(0);
    expect(metricValue(text, 'acw_endpoint_adaptive_limit', { endpoint: 'crm' })).toBe(16);
  });
});

describe('in flight, per process', () => {
  let rx: Receiver;
  let worker: Api;
  let release: (() => void) | undefined;

  beforeAll(async () => {
    await db.pool.query('truncate job_queue, job_history, endpoint_state cascade');
    const gate = new Promise<void>((r) => (release = r));
    rx = await startReceiver(async () => {
      await gate;
      return { status: 200 };
    });
    worker = await startApi(db, {
      notify: { webhook: { url: rx.url, secret: 'in-flight-secret', topics: ['a.*'], max_in_flight: 4 } },
    });
  });
  afterAll(async () => {
    release?.();
    await worker.close();
    await rx.close();
  });

  it('GET /v1/endpoints and /metrics show the deliveries running in the process that answers', async () => {
    const sent = await call(worker.url, 'POST', '/v1/endpoints/default/test', { token: admin });
    expect(sent.status).toBe(202);
    await rx.waitForRequests(1);
    const view = (await call(worker.url, 'GET', '/v1/endpoints', { token: admin })).body.items[0];
    expect(view).toMatchObject({ name: 'default', in_flight: 1, adaptive_limit: 4, held_jobs: 0 });
    const text = (await call(worker.url, 'GET', '/metrics')).text;
    expect(metricValue(text, 'acw_endpoint_in_flight', { endpoint: 'default' })).toBe(1);
    release?.();
    await waitFor(async () => (await call(worker.url, 'GET', '/v1/endpoints', { token: admin })).body.items[0].in_flight === 0);
  });
});
