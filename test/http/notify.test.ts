import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let svcToken: string;
let otherToken: string;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['workspace.*'] } } });
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
  svcToken = await makeUser(db.pool, 'billing', 'service');
  otherToken = await makeUser(db.pool, 'search', 'service');
  await makeUser(db.pool, 'alice', 'viewer');
});

const ev = (i: number) => ({ topic: `workspace.e${i}`, data: { i } });
const notify = (body: unknown, token = svcToken) => call(api.url, 'POST', '/v1/notify', { token, body });
const batch = (events: unknown[]) => call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
/** Wait until no job is pending or running, so row counts hold still for a before/after comparison. */
const settled = () =>
  waitFor(async () => (await db.pool.query(`select 1 from jobs where status in ('pending', 'running')`)).rows.length === 0);

describe('POST /v1/notify', () => {
  it('accepts with 202, the event id and one job per matching endpoint, and delivers it', async () => {
    const res = await notify({ topic: 'workspace.sync_failed', data: { id: 7 }, recipients: ['alice'] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      event_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      job_ids: [expect.stringMatching(/^[0-9a-f-]{36}$/)],
      replayed: false,
    });
    await rx.waitForRequests(1);
    const note = await db.pool.query(`select n.topic, n.data from notifications n join users u on u.id = n.user_id where u.name = 'alice'`);
    expect(note.rows).toEqual([{ topic: 'workspace.sync_failed', data: { id: 7 } }]);
  });

  it('a topic no endpoint lists is a 202 with no job and says why', async () => {
    const res = await notify({ topic: 'other.thing', data: null });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint' });
    expect((await rowCounts(db.pool)).jobs).toBe(0);
  });

  it('the same key from the same user again is a 200 with the first answer, replayed: true, and nothing written', async () => {
    const body = { topic: 'workspace.sync_failed', data: { n: 1 }, idempotency_key: 'k-1' };
    const first = await notify(body);
    expect(first.status).toBe(202);
    expect(first.body.replayed).toBe(false);
    await settled();
    const before = await rowCounts(db.pool);
    const again = await notify(body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...first.body, replayed: true });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('the same key with a different body is a 409 naming idempotency_key', async () => {
    await notify({ topic: 'workspace.sync_failed', data: { n: 1 }, idempotency_key: 'k-2' });
    await settled();
    const before = await rowCounts(db.pool);
    const res = await notify({ topic: 'workspace.sync_failed', data: { n: 2 }, idempotency_key: 'k-2' });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'idempotency_conflict', details: { field: 'idempotency_key' } });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('the same data with its keys in another order, at any depth, is the same request: a 200 replay, not a 409', async () => {
    const first = await notify({
      topic: 'workspace.sync_failed',
      data: { a: 1, b: { x: [1, { p: 1, q: 2 }], y: 2 } },
      idempotency_key: 'k-order',
    });
    expect(first.status).toBe(202);
    await settled();
    const before = await rowCounts(db.pool);
    const again = await notify({
      idempotency_key: 'k-order',
      data: { b: { y: 2, x: [1, { q: 2, p: 1 }] }, a: 1 },
      topic: 'workspace.sync_failed',
    });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ event_id: first.body.event_id, job_ids: first.body.job_ids });
    expect(await rowCounts(db.pool)).toEqual(before);
    // Array order is data: the same items in another order are a different request.
    const swapped = await notify({
      topic: 'workspace.sync_failed',
      data: { a: 1, b: { x: [{ p: 1, q: 2 }, 1], y: 2 } },
      idempotency_key: 'k-order',
    });
    expect(swapped.status).toBe(409);
  });

  it('keys belong to the user: another user may use the same key', async () => {
    const body = { topic: 'workspace.sync_failed', data: {}, idempotency_key: 'shared' };
    const a = await notify(body);
    const b = await notify(body, otherToken);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(a.body.event_id).not.toBe(b.body.event_id);
  });

  it('an unknown recipient is a 400 naming it, and nothing is written', async () => {
    const before = await rowCounts(db.pool);
    const res = await notify({ topic: 'workspace.sync_failed', data: {}, recipients: ['alice', 'mallory'] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'unknown_recipients', details: { field: 'recipients', names: ['mallory'] } });
    expect(res.body.error.message).toContain('mallory');
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('counts the enqueued jobs in /metrics', async () => {
    await notify({ topic: 'workspace.metrics', data: {} });
    const m = await call(api.url, 'GET', '/metrics');
    expect(m.text).toMatch(/acw_jobs_enqueued_total\{type="webhook.deliver",topic="workspace.metrics"\} 1/);
  });
});

describe('POST /v1/notify/batch', () => {
  it('accepts every event in one go: 202 with one result each', async () => {
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events: [ev(0), ev(1), ev(2)] } });
    expect(res.status).toBe(202);
    expect(res.body.results).toHaveLength(3);
    for (const r of res.body.results) expect(r.job_ids).toHaveLength(1);
    await waitFor(async () => (await db.pool.query(`select 1 from jobs where status = 'completed'`)).rows.length === 3);
  });

  it('says per event whether it replays a key used before: 202 while any is new, 200 when all are replays', async () => {
    const old = { ...ev(0), idempotency_key: 'b-old' };
    const first = await notify(old);
    const mixed = await batch([old, { ...ev(1), idempotency_key: 'b-new' }, ev(2)]);
    expect(mixed.status).toBe(202);
    expect(mixed.body.results.map((r: { replayed: boolean }) => r.replayed)).toEqual([true, false, false]);
    expect(mixed.body.results[0]).toEqual({ ...first.body, replayed: true });
    const again = await batch([{ ...ev(1), idempotency_key: 'b-new' }, old]);
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual([{ ...mixed.body.results[1], replayed: true }, mixed.body.results[0]]);
  });

  it('the same key twice in one batch: the second is a replay of the first (the test client does the same)', async () => {
    const e = { ...ev(0), idempotency_key: 'twice' };
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events: [e, e] } });
    expect(res.status).toBe(202);
    expect(res.body.results[1]).toEqual({ ...res.body.results[0], replayed: true });
    expect(res.body.results[0].replayed).toBe(false);
  });

  it('one bad event: a 400 naming events[3].topic and nothing written', async () => {
    // The earlier tests' jobs are delivered first: their attempt rows must not land between the counts.
    await settled();
    const before = await rowCounts(db.pool);
    const events = [ev(0), ev(1), ev(2), { topic: 'Bad Topic!', data: {} }, ev(4)];
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
    expect(res.status).toBe(400);
    expect(res.body.error.details.field).toBe('events[3].topic');
    expect(res.body.error.message).toMatch(/^events\[3\]\.topic: /);
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a failure found in the database (unknown recipient of event 2) rolls back the whole batch', async () => {
    const before = await rowCounts(db.pool);
    const events = [ev(0), ev(1), { ...ev(2), recipients: ['nobody'] }];
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
    expect(res.status).toBe(400);
    expect(res.body.error.details.field).toBe('events[2].recipients');
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a key used before with other data, inside a batch: a 409 naming that event, and the whole batch rolls back', async () => {
    await notify({ topic: 'workspace.sync_failed', data: { n: 1 }, idempotency_key: 'k-batch' });
    await settled();
    const before = await rowCounts(db.pool);
    const events = [ev(0), { topic: 'workspace.sync_failed', data: { n: 2 }, idempotency_key: 'k-batch' }, ev(2)];
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'idempotency_conflict', details: { field: 'events[1].idempotency_key' } });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('one key twice in a batch with different data: a 409 naming the later event, and nothing written', async () => {
    const before = await rowCounts(db.pool);
    const events = [
      { topic: 'workspace.a', data: { n: 1 }, idempotency_key: 'k-twice' },
      { topic: 'workspace.a', data: { n: 2 }, idempotency_key: 'k-twice' },
    ];
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'idempotency_conflict', details: { field: 'events[1].idempotency_key' } });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('one key twice in a batch with the same data: one event, and both results carry its answer', async () => {
    const e = { topic: 'workspace.a', data: { n: 1 }, idempotency_key: 'k-same' };
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events: [e, { ...e }] } });
    expect(res.status).toBe(202);
    expect(res.body.results[1]).toMatchObject({ event_id: res.body.results[0].event_id, job_ids: res.body.results[0].job_ids });
    expect((await db.pool.query(`select count(*)::int as n from events where idempotency_key = 'k-same'`)).rows[0].n).toBe(1);
  });

  it('more than 1000 events is a 400 naming events', async () => {
    const events = Array.from({ length: 1001 }, (_, i) => ev(i));
    const res = await call(api.url, 'POST', '/v1/notify/batch', { token: svcToken, body: { events } });
    expect(res.status).toBe(400);
    expect(res.body.error.details.field).toBe('events');
  });
});
