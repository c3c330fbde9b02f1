// A failing endpoint (docs/operations.md#failing-endpoints) against a real receiver that answers
// 422 to everything: its circuit stays closed (the receiver is up), but after circuit.min_attempts
// deliveries one `endpoint.failing` alert names the status, its health reads `failing`, and its
// dead jobs stop sending an inbox message each; once it answers 2xx again, one summary says how
// many went dead meanwhile. Then the alerts are filtered and acknowledged through the API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let service: string;
beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver(() => ({ status: 422, body: 'unprocessable' }));
  api = await startApi(db, {
    notify: { webhook: { endpoints: [{ name: 'crm', url: `${rx.url}/crm`, secret: 'crm-secret', topics: ['*'] }] } },
  });
  admin = await makeUser(db.pool, 'ops', 'admin');
  service = await makeUser(db.pool, 'billing', 'service');
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});

const notify = async (n: number) => {
  const res = await call(api.url, 'POST', '/v1/notify/batch', {
    token: service,
    body: { events: Array.from({ length: n }, (_, i) => ({ topic: 'crm.sync', data: { i } })) },
  });
  expect(res.status).toBe(202);
};
const finished = async (status: string) =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from job_history where endpoint = 'crm' and status = $1`, [status]))
    .rows[0]!.n;
const alerts = async (query = '') =>
  (await call(api.url, 'GET', `/v1/alerts${query}`, { token: admin })).body.items as Array<Record<string, unknown>>;
const inbox = async (topic: string) =>
  (
    await db.pool.query<{ n: number }>(
      `select count(*)::int as n from notifications n join users u on u.id = n.user_id where u.name = 'ops' and n.topic = $1`,
      [topic],
    )
  ).rows[0]!.n;
const view = async () => (await call(api.url, 'GET', '/v1/endpoints/crm', { token: admin })).body;

describe('a failing endpoint', () => {
  it('raises one alert naming 422, reads failing, pauses per-job messages, and sums them up once it recovers', async () => {
    const minAttempts = api.svc.config.notify.webhook.circuit.min_attempts;
    await notify(minAttempts);
    const failing = await waitFor(async () => (await alerts('?action=endpoint.failing'))[0] ?? null);
    expect(failing).toMatchObject({ endpoint: 'crm', status_codes: [422], state: 'open', min_attempts: minAttempts });
    expect(await view()).toMatchObject({
      health: 'failing',
      failing: { status_codes: [422] },
      circuit: { state: 'closed' },
      last_error: expect.stringContaining('422'),
    });

    // Ten more while it fails: each goes dead with its audit row, and no inbox message.
    const before = await inbox('webhook.dead_letter');
    await notify(10);
    await waitFor(async () => ((await finished('dead')) === minAttempts + 10 ? true : null));
    const deadLetters = await db.pool.query<{ n: number }>(`select count(*)::int as n from audit_log where action = 'webhook.dead_letter'`);
    expect(deadLetters.rows[0]!.n).toBe(minAttempts + 10);
    expect(await inbox('webhook.dead_letter')).toBe(before);

    // It answers again: once a run of min_attempts is mostly 2xx, one summary.
    rx.setResponder(() => ({ status: 200, body: 'ok' }));
    // (The run that judged it failing may hold some of the 422s above: a few runs may be needed.)
    for (let sent = 0; sent < 4 * minAttempts && (await view()).health === 'failing';) {
      await notify(minAttempts);
      sent += minAttempts;
      await waitFor(async () => ((await finished('completed')) === sent ? true : null));
    }
    const [resolved] = await waitFor(async () => {
      const a = await alerts('?action=endpoint.failing_resolved');
      return a.length > 0 ? a : null;
    });
    const paused = minAttempts + 10 - before;
    expect(resolved).toMatchObject({ endpoint: 'crm', failing_alert_id: failing.id, status_codes: [422], state: 'resolved' });
    expect(resolved!.dead_jobs).toBe(paused);
    expect(paused).toBeGreaterThanOrEqual(10);
    expect(await inbox('endpoint.failing_resolved')).toBe(1);
    expect(await inbox('endpoint.failing')).toBe(1);
    expect(await view()).toMatchObject({ health: 'healthy', failing: null });
    expect((await alerts('?action=endpoint.failing'))[0]).toMatchObject({ state: 'resolved', resolved_by: resolved!.id });

    // Filter and acknowledge: the dead letters are open until acknowledged.
    const open = await alerts('?state=open&limit=500');
    expect(open.map((a) => a.action).toSorted()).toEqual(Array.from({ length: minAttempts + 10 }, () => 'webhook.dead_letter'));
    const one = await call(api.url, 'POST', `/v1/alerts/${String(open[0]!.id)}/ack`, { token: admin });
    expect(one.body).toMatchObject({ state: 'resolved', acknowledged_by: 'ops' });
    const again = await call(api.url, 'POST', `/v1/alerts/${String(open[0]!.id)}/ack`, { token: admin });
    expect(again.body.acknowledged_at).toBe(one.body.acknowledged_at);
    const all = await call(api.url, 'POST', '/v1/alerts/ack', { token: admin });
    // Every alert but the one acknowledged already: the dead letters, the failing alert and its summary.
    expect(all.body.acknowledged).toBe(minAttempts + 10 - 1 + 2);
    expect(await alerts('?state=open')).toEqual([]);
    expect(await alerts('?acknowledged=false')).toEqual([]);
    const viewer = await makeUser(db.pool, 'eve', 'viewer');
    expect((await call(api.url, 'POST', '/v1/alerts/ack', { token: viewer })).status).toBe(403);
  });
});

describe('a failing endpoint with the circuit breaker off', () => {
  it('is judged all the same: one alert naming 422, health failing, last error kept, and its circuit never opens', async () => {
    const own = await createTestDatabase();
    const refuser = await startReceiver(() => ({ status: 422, body: 'unprocessable' }));
    const svc = await startApi(own, {
      notify: {
        webhook: {
          circuit: { enabled: false },
          endpoints: [{ name: 'crm', url: `${refuser.url}/crm`, secret: 'crm-secret', topics: ['*'] }],
        },
      },
    });
    try {
      const ops = await makeUser(own.pool, 'ops', 'admin');
      const billing = await makeUser(own.pool, 'billing', 'service');
      const minAttempts = svc.svc.config.notify.webhook.circuit.min_attempts;
      const res = await call(svc.url, 'POST', '/v1/notify/batch', {
        token: billing,
        body: { events: Array.from({ length: minAttempts }, (_, i) => ({ topic: 'crm.sync', data: { i } })) },
      });
      expect(res.status).toBe(202);
      const failing = await waitFor(
        async () => (await call(svc.url, 'GET', '/v1/alerts?action=endpoint.failing', { token: ops })).body.items[0] ?? null,
      );
      expect(failing).toMatchObject({ endpoint: 'crm', status_codes: [422], state: 'open' });
      expect((await call(svc.url, 'GET', '/v1/endpoints/crm', { token: ops })).body).toMatchObject({
        health: 'failing',
        circuit: { state: 'closed', consecutive_failures: 0 },
        last_error: expect.stringContaining('422'),
      });
    } finally {
      await svc.close();
      await refuser.close();
      await own.drop();
    }
  });
});
