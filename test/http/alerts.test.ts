import { request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { openSse, waitForText, type SseStream } from '../helpers/sse.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let viewer: string;
let service: string;
const streams: SseStream[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver(() => ({ status: 410, body: 'gone' }));
});
afterAll(async () => {
  await rx.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('truncate jobs, webhook_attempts, events, notifications, audit_log, users cascade');
  viewer = await makeUser(db.pool, 'watcher', 'viewer');
  service = await makeUser(db.pool, 'billing', 'service');
  await makeUser(db.pool, 'ops', 'admin');
  rx.requests.splice(0);
  api = await startApi(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } });
});
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  await api.close();
});

const stream = async (query = '', headers: Record<string, string> = {}) => {
  const s = await openSse(`${api.url}/v1/alerts/stream${query}`, { authorization: `Bearer ${viewer}`, ...headers });
  streams.push(s);
  return s;
};
const notifyDead = async (n = 1) => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'billing.failed', data: { i } } });
    ids.push(res.body.job_ids[0]);
  }
  return ids;
};

describe('GET /v1/alerts/stream', () => {
  it('passes a dead letter on when NOTIFY wakes it, before the stream would poll', async () => {
    const s = await stream();
    expect(s.status).toBe(200);
    expect(s.contentType).toMatch(/^text\/event-stream/);
    await waitForText(s, ': connected');
    const [jobId] = await notifyDead();
    const [ev] = await s.waitForEvents(1, 10_000);
    const answeredAt = rx.requests[0]!.receivedAt;
    // Not a speed limit: the stream re-reads every 5 s without a wake-up (src/admin/alerts.ts,
    // pollMs), so an event sooner than that came from the NOTIFY.
    expect(ev!.at - answeredAt).toBeLessThan(5_000);
    expect(ev!.event).toBe('dead_letter');
    const data = JSON.parse(ev!.data);
    const audit = (await db.pool.query(`select id from audit_log where action = 'webhook.dead_letter'`)).rows[0];
    expect(ev!.id).toBe(String(audit.id));
    expect(data).toMatchObject({
      id: Number(audit.id),
      action: 'webhook.dead_letter',
      job_id: jobId,
      topic: 'billing.failed',
      endpoint: 'default',
      reason: 'permanent',
    });
  });

  it('a reconnect with Last-Event-ID replays exactly what was missed, in order', async () => {
    const first = await stream();
    await waitForText(first, ': connected');
    await notifyDead();
    const [seen] = await first.waitForEvents(1);
    first.close();
    const missed = await notifyDead(2);
    await waitFor(async () => (await db.pool.query(`select 1 from audit_log where action = 'webhook.dead_letter'`)).rows.length === 3);

    const again = await stream('', { 'last-event-id': seen!.id! });
    const evs = await again.waitForEvents(2);
    expect(evs.map((e) => JSON.parse(e.data).job_id).toSorted()).toEqual(missed.toSorted());
    expect(Number(evs[0]!.id)).toBeGreaterThan(Number(seen!.id));
    expect(Number(evs[1]!.id)).toBeGreaterThan(Number(evs[0]!.id));
    // Nothing else was replayed: the next event is one that happened after the reconnect.
    const [later] = await notifyDead();
    const third = await again.waitForEvents(3);
    expect(third.map((e) => JSON.parse(e.data).job_id)).toEqual([...evs.map((e) => JSON.parse(e.data).job_id), later]);
  });

  it('?since=0 replays every alert, then follows', async () => {
    await notifyDead();
    await waitFor(async () => (await db.pool.query(`select 1 from audit_log`)).rows.length === 1);
    const s = await stream('?since=0');
    await s.waitForEvents(1);
    await notifyDead();
    const evs = await s.waitForEvents(2);
    expect(evs.map((e) => e.event)).toEqual(['dead_letter', 'dead_letter']);
  });

  it('sends nothing old without Last-Event-ID or since', async () => {
    await notifyDead();
    await waitFor(async () => (await db.pool.query(`select 1 from audit_log`)).rows.length === 1);
    const s = await stream();
    await waitForText(s, ': connected');
    // The first event to arrive is one that happened after connecting, not the old one.
    const [fresh] = await notifyDead();
    const [ev] = await s.waitForEvents(1);
    expect(JSON.parse(ev!.data).job_id).toBe(fresh);
  });

  it('ends the stream cleanly when the server shuts down', async () => {
    const s = await stream();
    await waitForText(s, ': connected');
    // An open stream that held the server would keep close() (and this test) from finishing.
    await api.app.close();
    await expect(s.ended).resolves.toBeUndefined();
  });

  it('lets go of the connection when the client disconnects', async () => {
    // node:http, so the socket really closes on destroy (fetch may keep it to drain).
    const req = httpRequest(`${api.url}/v1/alerts/stream`, { headers: { authorization: `Bearer ${viewer}` } });
    const res = await new Promise<IncomingMessage>((resolve, reject) => req.on('response', resolve).on('error', reject).end());
    expect(res.statusCode).toBe(200);
    await new Promise((r) => res.once('data', r));
    req.destroy();
    await waitFor(() => new Promise<boolean>((resolve) => api.app.server.getConnections((_e, n) => resolve(n === 0))), 3_000);
    // A later alert finds no stream to write to and raises no error.
    await notifyDead();
    await waitFor(async () => (await db.pool.query(`select 1 from audit_log`)).rows.length === 1);
    expect(api.events('http.sse_error')).toEqual([]);
  });

  it('a revoked viewer loses the stream at the next alert', async () => {
    const s = await stream();
    await waitForText(s, ': connected');
    await db.pool.query(`update users set revoked_at = now() where name = 'watcher'`);
    await notifyDead();
    await s.ended;
    expect(s.events).toHaveLength(0);
  });
});
