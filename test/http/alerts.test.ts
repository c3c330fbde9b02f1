import { request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ALERT_ACTIONS } from '../../src/admin/alerts.js';
import { raiseEndpointAlert, type EndpointAlertAction } from '../../src/endpoint-state/alerts.js';
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
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
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
    expect(ev!.event).toBe('webhook.dead_letter');
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
    expect(evs.map((e) => e.event)).toEqual(['webhook.dead_letter', 'webhook.dead_letter']);
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

const raise = (action: EndpointAlertAction, endpoint = 'crm', details: Record<string, unknown> = {}) =>
  raiseEndpointAlert(db.pool, api.svc.channels.alerts, { action, endpoint, details });
/** `n` real dead letters (a 410 from the receiver), once their audit rows are there. */
const deadLetters = async (n: number) => {
  const before = await auditCount();
  const ids = await notifyDead(n);
  await waitFor(async () => (await auditCount()) === before + n);
  return ids;
};
const auditCount = async () => (await db.pool.query(`select count(*)::int as n from audit_log`)).rows[0].n as number;
const list = (query = '', token = viewer) => call(api.url, 'GET', `/v1/alerts${query}`, { token });
/** Every page of `query` (which sets its own limit), following next_cursor to the end. */
const allPages = async (query: string) => {
  const pages: Array<Array<Record<string, unknown>>> = [];
  let cursor: string | null = null;
  do {
    const res = await list(`${query}${cursor === null ? '' : `&cursor=${cursor}`}`);
    expect(res.status).toBe(200);
    pages.push(res.body.items);
    cursor = res.body.next_cursor;
  } while (cursor !== null);
  return pages;
};
const alertRows = async (actions: string[] = [...ALERT_ACTIONS]) =>
  (
    await db.pool.query<{ id: string; action: string }>(`select id, action from audit_log where action = any($1) order by id desc`, [
      actions,
    ])
  ).rows.map((r) => ({ id: Number(r.id), action: r.action }));

describe('GET /v1/alerts', () => {
  it('lists dead letters and endpoint alerts newest first, each with its action, a page at a time', async () => {
    const [jobA, jobB] = await deadLetters(2);
    await raise('endpoint.circuit_opened', 'crm', { consecutive_failures: 10 });
    await raise('endpoint.circuit_closed', 'crm');
    await raise('endpoint.expired', 'crm', { count: 3 });
    await raise('endpoint.circuit_opened', 'erp');
    // An operator action is audited but is no alert.
    await db.pool.query(`insert into audit_log (action, actor) values ('job.retry', 'ops')`);
    const expected = await alertRows();
    expect(expected).toHaveLength(6);

    const pages = await allPages('?limit=4');
    expect(pages.map((p) => p.length)).toEqual([4, 2]);
    const items = pages.flat();
    expect(items.map((a) => ({ id: a.id, action: a.action }))).toEqual(expected);
    expect(items[0]).toMatchObject({ action: 'endpoint.circuit_opened', endpoint: 'erp', created_at: expect.any(String) });
    expect(items[1]).toMatchObject({ action: 'endpoint.expired', endpoint: 'crm', count: 3 });
    expect(items[3]).toMatchObject({ action: 'endpoint.circuit_opened', endpoint: 'crm', consecutive_failures: 10 });
    expect(
      items
        .slice(4)
        .map((a) => a.job_id)
        .toSorted(),
    ).toEqual([jobA, jobB].toSorted());
    expect(items.slice(4).every((a) => a.action === 'webhook.dead_letter' && a.reason === 'permanent')).toBe(true);

    // Without a limit: 50, so one page here; an admin reads it too.
    const whole = await list('', (await makeUser(db.pool, 'ops', 'admin')) as string);
    expect(whole.status).toBe(200);
    expect(whole.body.items.map((a: { id: number }) => a.id)).toEqual(expected.map((a) => a.id));
    expect(whole.body.next_cursor).toBeNull();
    expect((await list('', service)).status).toBe(403);
  });

  it('a page after the cursor is the same however many alerts arrive meanwhile', async () => {
    for (let i = 0; i < 5; i++) await raise('endpoint.circuit_opened', `ep${i}`);
    const before = await alertRows();
    const first = await list('?limit=2');
    await raise('endpoint.circuit_closed', 'ep0');
    await deadLetters(1);
    const second = await list(`?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.items.map((a: { id: number }) => a.id)).toEqual(before.slice(2, 4).map((a) => a.id));
  });

  it('?action keeps only those actions: one, several repeated or comma-separated, across pages', async () => {
    await deadLetters(1);
    for (const a of ['endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.circuit_opened', 'endpoint.expired'] as const) {
      await raise(a);
    }
    await raise('endpoint.circuit_closed');
    await raise('endpoint.circuit_opened');

    const opened = await list('?action=endpoint.circuit_opened');
    expect(opened.body.items.map((a: { id: number; action: string }) => ({ id: a.id, action: a.action }))).toEqual(
      await alertRows(['endpoint.circuit_opened']),
    );
    expect(opened.body.items).toHaveLength(3);

    const both = await alertRows(['endpoint.circuit_closed', 'webhook.dead_letter']);
    expect(both).toHaveLength(3);
    const commas = (await allPages('?limit=2&action=endpoint.circuit_closed,webhook.dead_letter')).flat();
    expect(commas.map((a) => ({ id: a.id, action: a.action }))).toEqual(both);
    const repeated = (await allPages('?limit=2&action=endpoint.circuit_closed&action=webhook.dead_letter')).flat();
    expect(repeated.map((a) => a.id)).toEqual(both.map((a) => a.id));
    // An action with no alerts yet is known, just empty.
    expect((await list('?action=job.dead_letter')).body).toEqual({ items: [], next_cursor: null });
  });

  it('bad query input is a 400 naming the field and writes nothing', async () => {
    await raise('endpoint.circuit_opened');
    const before = {
      audit: await auditCount(),
      notifications: (await db.pool.query(`select count(*)::int as n from notifications`)).rows[0].n,
    };
    const cases: Array<[string, string]> = [
      ['?action=endpoint.exploded', 'action'],
      ['?action=', 'action'],
      ['?action=endpoint.circuit_opened,nope', 'action'],
      ['?action=endpoint.circuit_opened&action=job.retry', 'action'],
      [`?action=${'x'.repeat(2000)}`, 'action'],
      [`?${Array.from({ length: 21 }, () => 'action=job.dead_letter').join('&')}`, 'action'],
      ['?action[]=job.dead_letter', 'action[]'],
      ['?limit=0', 'limit'],
      ['?limit=501', 'limit'],
      ['?limit=ten', 'limit'],
      ['?cursor=not*a*cursor', 'cursor'],
      // A cursor of another list's shape (a job's): not one this route issued.
      [`?cursor=${Buffer.from('1700000000000000|0b7e4c1a-3f2d-4b8e-9a6c-5d4e3f2a1b0c').toString('base64url')}`, 'cursor'],
      ['?since=0', 'since'],
    ];
    for (const [query, field] of cases) {
      const res = await list(query);
      // The query in the object, so a failure says which case.
      const { message } = res.body.error;
      expect({ query, status: res.status, field: res.body.error.details.field, named: message.startsWith(`${field}: `) }).toEqual({
        query,
        status: 400,
        field,
        named: true,
      });
    }
    const unknown = await list('?action=endpoint.exploded');
    expect(unknown.body.error.message).toContain('"endpoint.exploded"');
    expect(unknown.body.error.message).toContain('endpoint.circuit_opened');
    // The stream refuses the same filter before it starts.
    const stream400 = await call(api.url, 'GET', '/v1/alerts/stream?action=nope', { token: viewer });
    expect(stream400.status).toBe(400);
    expect(stream400.body.error.details.field).toBe('action');
    expect({
      audit: await auditCount(),
      notifications: (await db.pool.query(`select count(*)::int as n from notifications`)).rows[0].n,
    }).toEqual(before);
  });
});

describe('GET /v1/alerts/stream, event names and ?action', () => {
  it('names each event by its action; ?action follows only those, Last-Event-ID included', async () => {
    const all = await stream();
    const some = await stream('?action=endpoint.circuit_opened,endpoint.circuit_closed');
    await waitForText(all, ': connected');
    await waitForText(some, ': connected');
    await deadLetters(1);
    await raise('endpoint.circuit_opened');
    await raise('endpoint.expired', 'crm', { count: 2 });
    await raise('endpoint.circuit_closed');

    const evs = await all.waitForEvents(4, 10_000);
    expect(evs.map((e) => e.event)).toEqual([
      'webhook.dead_letter',
      'endpoint.circuit_opened',
      'endpoint.expired',
      'endpoint.circuit_closed',
    ]);
    for (const e of evs) {
      expect(JSON.parse(e.data).action).toBe(e.event);
      expect(JSON.parse(e.data).id).toBe(Number(e.id));
    }
    expect(evs.map((e) => Number(e.id))).toEqual((await alertRows()).map((a) => a.id).toReversed());

    const [opened, closed] = await some.waitForEvents(2, 10_000);
    expect([opened!.event, closed!.event]).toEqual(['endpoint.circuit_opened', 'endpoint.circuit_closed']);
    expect([opened!.id, closed!.id]).toEqual([evs[1]!.id, evs[3]!.id]);

    // A reconnect with the same filter replays what it missed of those actions only.
    some.close();
    const again = await stream('?action=endpoint.circuit_opened,endpoint.circuit_closed', { 'last-event-id': opened!.id! });
    const [replayed] = await again.waitForEvents(1);
    expect(replayed).toMatchObject({ id: closed!.id, event: 'endpoint.circuit_closed' });
    await raise('endpoint.expired');
    await deadLetters(1);
    await raise('endpoint.circuit_opened', 'erp');
    const [, next] = await again.waitForEvents(2, 10_000);
    expect(next!.event).toBe('endpoint.circuit_opened');
    expect(JSON.parse(next!.data).endpoint).toBe('erp');
  });
});
