import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, insertJob, makeUser, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let viewer: string;
let service: string;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } });
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
  admin = await makeUser(db.pool, 'ops', 'admin');
  viewer = await makeUser(db.pool, 'watcher', 'viewer');
  service = await makeUser(db.pool, 'billing', 'service');
  rx.setResponder(() => ({ status: 200, body: 'ok' }));
  rx.requests.splice(0);
});

const get = (path: string) => call(api.url, 'GET', path, { token: viewer });
const post = (path: string, body?: unknown) => call(api.url, 'POST', path, { token: admin, body });
const jobStatus = async (id: string) => (await db.pool.query('select status from jobs where id = $1', [id])).rows[0]?.status;
const audit = async (action: string) =>
  (await db.pool.query('select actor, target_type, target_id, details from audit_log where action = $1 order by id', [action])).rows;

describe('GET /v1/jobs', () => {
  it('lists newest first and pages with an opaque cursor until next_cursor is null', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await insertJob(db.pool, { status: 'completed', createdAgoMs: (7 - i) * 1000 }));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await get(`/v1/jobs?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.items.map((j: { id: string }) => j.id));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids.toReversed());
  });

  it('pages correctly through jobs created in the same microsecond (id breaks the tie)', async () => {
    await db.pool.query(
      `insert into jobs (type, payload, status, created_at) select 'x', '{}', 'completed', '2024-01-01T00:00:00.123456Z' from generate_series(1, 5)`,
    );
    const first = await get('/v1/jobs?limit=2');
    const second = await get(`/v1/jobs?limit=2&cursor=${first.body.next_cursor}`);
    const third = await get(`/v1/jobs?limit=2&cursor=${second.body.next_cursor}`);
    const all = [...first.body.items, ...second.body.items, ...third.body.items].map((j: { id: string }) => j.id);
    expect(new Set(all).size).toBe(5);
    expect(third.body.next_cursor).toBeNull();
  });

  it('filters by status, type, topic, endpoint and event id', async () => {
    const ev = randomUUID();
    const dead = await insertJob(db.pool, { status: 'dead', topic: 'billing.failed', endpoint: 'default', eventId: ev });
    await insertJob(db.pool, { status: 'completed', topic: 'billing.ok', endpoint: 'other' });
    await insertJob(db.pool, { status: 'pending', topic: 'billing.failed', endpoint: 'other' });
    const ids = async (q: string) => (await get(`/v1/jobs?${q}`)).body.items.map((j: { id: string }) => j.id);
    expect(await ids('status=dead')).toEqual([dead]);
    expect(await ids('topic=billing.failed&endpoint=default')).toEqual([dead]);
    expect(await ids(`event_id=${ev}`)).toEqual([dead]);
    expect(await ids('type=webhook.deliver')).toHaveLength(3);
    expect(await ids('endpoint=other')).toHaveLength(2);
    const one = (await get('/v1/jobs?status=dead')).body.items[0];
    expect(Object.keys(one).toSorted()).toEqual(
      [
        'attempts',
        'completed_at',
        'created_at',
        'endpoint',
        'event_id',
        'held',
        'id',
        'last_error',
        'max_attempts',
        'run_at',
        'status',
        'topic',
        'type',
      ].toSorted(),
    );
  });
});

describe('GET /v1/jobs/:id', () => {
  it('shows the job with its delivery attempts, oldest first', async () => {
    let n = 0;
    rx.setResponder(() => ({ status: ++n === 1 ? 503 : 200, body: n === 1 ? 'busy' : 'ok' }));
    const sent = await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'a.b', data: { x: 1 } } });
    const id = sent.body.job_ids[0] as string;
    await waitFor(async () => (await jobStatus(id)) === 'completed');
    const res = await get(`/v1/jobs/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id,
      status: 'completed',
      attempts: 2,
      topic: 'a.b',
      endpoint: 'default',
      event_id: sent.body.event_id,
    });
    expect(res.body.deliveries.map((d: { attempt: number; status_code: number }) => [d.attempt, d.status_code])).toEqual([
      [1, 503],
      [2, 200],
    ]);
    expect(res.body.deliveries[0]).toMatchObject({ error_kind: 'http_status', response_body: 'busy', lease_lost: false, aborted: false });
  });
});

describe('operator actions', () => {
  it('retry of a dead job redelivers it with a fresh attempt series, audited with the actor', async () => {
    rx.setResponder(() => ({ status: 410 }));
    const sent = await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'a.b', data: {} } });
    const id = sent.body.job_ids[0] as string;
    await waitFor(async () => (await jobStatus(id)) === 'dead');
    rx.setResponder(() => ({ status: 200 }));
    const res = await post(`/v1/jobs/${id}/retry`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, status: 'pending', attempts: 0 });
    await waitFor(async () => (await jobStatus(id)) === 'completed');
    expect(rx.requests).toHaveLength(2);
    expect(rx.requests[1]!.body.equals(rx.requests[0]!.body)).toBe(true);
    expect(await audit('job.retry')).toEqual([
      { actor: 'ops', target_type: 'job', target_id: id, details: expect.objectContaining({ from_status: 'dead' }) },
    ]);
  });

  it('retry of a cancelled job sends it after all, audited with the status it came from', async () => {
    const id = await insertJob(db.pool, { status: 'pending' });
    expect((await post(`/v1/jobs/${id}/cancel`)).status).toBe(200);
    const res = await post(`/v1/jobs/${id}/retry`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, status: 'pending', attempts: 0 });
    await waitFor(async () => (await jobStatus(id)) === 'completed');
    expect(rx.requests).toHaveLength(1);
    expect(await audit('job.retry')).toEqual([
      { actor: 'ops', target_type: 'job', target_id: id, details: expect.objectContaining({ from_status: 'cancelled' }) },
    ]);
  });

  it('retry of a pending job is a 409 naming its status; of an unknown job a 404', async () => {
    const id = await insertJob(db.pool, { status: 'pending' });
    const res = await post(`/v1/jobs/${id}/retry`);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain('pending');
    expect((await post(`/v1/jobs/${randomUUID()}/retry`)).status).toBe(404);
    expect(await audit('job.retry')).toEqual([]);
  });

  it('cancel moves a pending job to cancelled (audited); a dead one is a 409', async () => {
    const id = await insertJob(db.pool, { status: 'pending' });
    const res = await post(`/v1/jobs/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('cancelled');
    expect(await jobStatus(id)).toBe('cancelled');
    expect(await audit('job.cancel')).toEqual([{ actor: 'ops', target_type: 'job', target_id: id, details: expect.any(Object) }]);
    const dead = await insertJob(db.pool, { status: 'dead' });
    const again = await post(`/v1/jobs/${dead}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain('dead');
  });

  it('redrive: a dry run counts and writes nothing; the real one re-queues the matching dead jobs once', async () => {
    rx.setResponder(() => ({ status: 200 }));
    const a = await insertJob(db.pool, { status: 'dead', topic: 'billing.failed', updatedAgoMs: 60_000 });
    const b = await insertJob(db.pool, { status: 'dead', topic: 'billing.failed', updatedAgoMs: 3 * 3600_000 });
    const c = await insertJob(db.pool, { status: 'dead', topic: 'other.thing' });
    const dry = await post('/v1/jobs/redrive', { status: 'dead', topic: 'billing.failed', dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toEqual({ count: 2, dry_run: true });
    expect(await audit('job.redrive')).toEqual([]);
    expect(await jobStatus(a)).toBe('dead');

    const since = await post('/v1/jobs/redrive', { status: 'dead', topic: 'billing.failed', since: '1h', dry_run: true });
    expect(since.body.count).toBe(1);
    // status may be left out: dead is the only status a redrive takes.
    expect((await post('/v1/jobs/redrive', { topic: 'billing.failed', dry_run: true })).body).toEqual({ count: 2, dry_run: true });

    const res = await post('/v1/jobs/redrive', { status: 'dead', topic: 'billing.failed' });
    expect(res.body).toEqual({ count: 2 });
    await waitFor(async () => (await jobStatus(a)) === 'completed' && (await jobStatus(b)) === 'completed');
    expect(await jobStatus(c)).toBe('dead');
    expect(await audit('job.redrive')).toEqual([
      { actor: 'ops', target_type: 'jobs', target_id: null, details: { filter: { status: 'dead', topic: 'billing.failed' }, count: 2 } },
    ]);
    expect((await post('/v1/jobs/redrive', { status: 'dead', topic: 'billing.failed' })).body).toEqual({ count: 0 });
  });

  it('POST /v1/endpoints/:name/test sends webhook.test to that endpoint even though no whitelist lists it', async () => {
    await api.close();
    api = await startApi(db, {
      notify: {
        webhook: {
          url: rx.url + '/default',
          secret: 's3cret',
          topics: ['billing.*'],
          endpoints: [{ name: 'crm', url: rx.url + '/crm', secret: 'other', topics: ['crm.*'] }],
        },
      },
    });
    const res = await post('/v1/endpoints/crm/test');
    expect(res.status).toBe(202);
    const [req] = await rx.waitForRequests(1);
    expect(req!.url).toBe('/crm');
    expect(JSON.parse(req!.body.toString()).topic).toBe('webhook.test');
    expect(await audit('endpoint.test')).toEqual([{ actor: 'ops', target_type: 'endpoint', target_id: 'crm', details: res.body }]);
    expect((await post('/v1/endpoints/nope/test')).status).toBe(404);

    await waitFor(async () => (await jobStatus(res.body.job_ids[0])) === 'completed');
    // One job only, now done: no other endpoint was sent the test (no sleep needed to say so).
    expect((await db.pool.query('select count(*)::int as n from jobs')).rows[0].n).toBe(1);
    expect(rx.requests).toHaveLength(1);
    const list = await get('/v1/endpoints');
    expect(list.status).toBe(200);
    const crm = list.body.items.find((e: { name: string }) => e.name === 'crm');
    expect(crm).toMatchObject({
      name: 'crm',
      url: rx.url + '/crm',
      topics: ['crm.*'],
      enabled: true,
      scheme: 'acw',
      attempts: 1,
      success_rate: 1,
    });
    expect(crm.p50_duration_ms).toEqual(expect.any(Number));
    expect(JSON.stringify(list.body)).not.toContain('other');
    expect(JSON.stringify(list.body)).not.toContain('s3cret');
  });
});
