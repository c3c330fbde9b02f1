import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, makeUser, postRaw, rowCounts, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let before: Record<string, number>;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } });
  admin = await makeUser(db.pool, 'ops', 'admin');
  await makeUser(db.pool, 'alice', 'viewer');
  before = await rowCounts(db.pool);
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});

/** Wait until no job is pending or running, so row counts hold still for a before/after comparison. */
const settled = () =>
  waitFor(async () => (await db.pool.query(`select 1 from jobs where status in ('pending', 'running')`)).rows.length === 0);
const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
const b64 = (s: string) => Buffer.from(s).toString('base64url');

interface Case {
  name: string;
  method?: string;
  path?: string;
  /** Sent as is; default content-type application/json. */
  raw?: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  field: string;
}

const cases: Case[] = [
  { name: 'malformed JSON', raw: '{"topic": "a.b", "data": ', status: 400, field: 'body' },
  { name: 'a JSON array instead of an object', raw: '[]', status: 400, field: 'body' },
  { name: 'an empty body', raw: '', status: 400, field: 'body' },
  { name: 'topic of the wrong type', body: { topic: 42, data: {} }, status: 400, field: 'topic' },
  { name: 'missing topic', body: { data: {} }, status: 400, field: 'topic' },
  { name: 'missing data', body: { topic: 'a.b' }, status: 400, field: 'data' },
  { name: 'recipients not a list', body: { topic: 'a.b', data: {}, recipients: 'alice' }, status: 400, field: 'recipients' },
  { name: 'an empty idempotency key', body: { topic: 'a.b', data: {}, idempotency_key: '' }, status: 400, field: 'idempotency_key' },
  { name: 'topic "Bad Topic!"', body: { topic: 'Bad Topic!', data: {} }, status: 400, field: 'topic' },
  { name: 'a NUL byte in data', raw: '{"topic":"a.b","data":{"x":"a\\u0000b"}}', status: 400, field: 'data' },
  { name: 'a NUL byte in a data key', raw: '{"topic":"a.b","data":{"a\\u0000":1}}', status: 400, field: 'data' },
  { name: 'a NUL byte in the topic', raw: '{"topic":"a\\u0000b","data":{}}', status: 400, field: 'topic' },
  { name: 'a lone surrogate in data', raw: '{"topic":"a.b","data":{"x":"\\ud800"}}', status: 400, field: 'data' },
  { name: 'nesting depth 1000', raw: `{"topic":"a.b","data":${nested(1000)}}`, status: 400, field: 'data' },
  { name: 'nesting depth 200000', raw: `{"topic":"a.b","data":${nested(200_000)}}`, status: 400, field: 'data' },
  { name: 'one event over 256 KiB of data', body: { topic: 'a.b', data: 'x'.repeat(300 * 1024) }, status: 413, field: 'data' },
  { name: 'unknown field idempotencyKey', body: { topic: 'a.b', data: {}, idempotencyKey: 'k' }, status: 400, field: 'idempotencyKey' },
  { name: 'a __proto__ field', raw: '{"topic":"a.b","data":{},"__proto__":{"admin":true}}', status: 400, field: '__proto__' },
  { name: 'text/plain content', raw: 'hello', headers: { 'content-type': 'text/plain' }, status: 415, field: 'content-type' },
  {
    name: 'form content',
    raw: 'topic=a.b',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
    field: 'content-type',
  },
  { name: 'batch events not a list', path: '/v1/notify/batch', body: { events: {} }, status: 400, field: 'events' },
  {
    name: 'batch event 1 missing data',
    path: '/v1/notify/batch',
    body: { events: [{ topic: 'a.b', data: 1 }, { topic: 'a.b' }] },
    status: 400,
    field: 'events[1].data',
  },
  { name: 'bad UUID in /v1/jobs/:id', method: 'GET', path: '/v1/jobs/not-a-uuid', status: 400, field: 'id' },
  { name: 'SQL in /v1/jobs/:id', method: 'GET', path: `/v1/jobs/${encodeURIComponent("1' or '1'='1")}`, status: 400, field: 'id' },
  { name: 'bad UUID in retry', path: '/v1/jobs/123/retry', status: 400, field: 'id' },
  { name: 'unknown field in a retry body', path: `/v1/jobs/${randomUUID()}/retry`, body: { force: true }, status: 400, field: 'force' },
  { name: 'garbage cursor', method: 'GET', path: '/v1/jobs?cursor=%%%', status: 400, field: 'cursor' },
  { name: 'a cursor of the wrong shape', method: 'GET', path: `/v1/jobs?cursor=${b64('123|not-a-uuid')}`, status: 400, field: 'cursor' },
  { name: 'a cursor not base64', method: 'GET', path: '/v1/jobs?cursor=abc.def', status: 400, field: 'cursor' },
  { name: 'limit 0', method: 'GET', path: '/v1/jobs?limit=0', status: 400, field: 'limit' },
  { name: 'limit not a number', method: 'GET', path: '/v1/jobs?limit=ten', status: 400, field: 'limit' },
  { name: 'limit past 500', method: 'GET', path: '/v1/jobs?limit=100000', status: 400, field: 'limit' },
  { name: 'an unknown status', method: 'GET', path: '/v1/jobs?status=zombie', status: 400, field: 'status' },
  { name: 'status given twice', method: 'GET', path: '/v1/jobs?status=dead&status=pending', status: 400, field: 'status' },
  { name: 'a misspelt query parameter', method: 'GET', path: '/v1/jobs?statuss=dead', status: 400, field: 'statuss' },
  { name: 'a NUL byte in a filter', method: 'GET', path: '/v1/jobs?type=%00', status: 400, field: 'type' },
  { name: 'a bad event_id filter', method: 'GET', path: '/v1/jobs?event_id=42', status: 400, field: 'event_id' },
  { name: 'redrive of pending jobs', path: '/v1/jobs/redrive', body: { status: 'pending' }, status: 400, field: 'status' },
  {
    name: 'redrive since "yesterday"',
    path: '/v1/jobs/redrive',
    body: { status: 'dead', since: 'yesterday' },
    status: 400,
    field: 'since',
  },
  { name: 'redrive dry_run "yes"', path: '/v1/jobs/redrive', body: { status: 'dead', dry_run: 'yes' }, status: 400, field: 'dry_run' },
  { name: 'a notification id that is no number', path: '/v1/notifications/abc/read', status: 400, field: 'id' },
  { name: 'a notification id past bigint', path: '/v1/notifications/99999999999999999999/read', status: 400, field: 'id' },
  { name: 'a bad notifications cursor', method: 'GET', path: '/v1/notifications?cursor=zzz', status: 400, field: 'cursor' },
  { name: 'unread_only "maybe"', method: 'GET', path: '/v1/notifications?unread_only=maybe', status: 400, field: 'unread_only' },
  { name: 'a NUL byte in an endpoint name', path: '/v1/endpoints/%00/test', status: 400, field: 'name' },
  {
    name: 'a bad Last-Event-ID',
    method: 'GET',
    path: '/v1/alerts/stream',
    headers: { 'last-event-id': 'abc' },
    status: 400,
    field: 'last-event-id',
  },
  { name: 'a negative ?since', method: 'GET', path: '/v1/alerts/stream?since=-1', status: 400, field: 'since' },
  { name: 'window_minutes 0', method: 'GET', path: '/v1/endpoints?window_minutes=0', status: 400, field: 'window_minutes' },
];

describe('bad input: a 4xx naming the field, and nothing written', () => {
  it.each(cases)('$name -> $status ($field)', async (c) => {
    const res = await call(api.url, c.method ?? 'POST', c.path ?? '/v1/notify', {
      token: admin,
      ...(c.raw !== undefined ? { raw: c.raw } : {}),
      ...(c.body !== undefined ? { body: c.body } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
    });
    expect({ status: res.status, body: res.text }).toMatchObject({ status: c.status });
    expect(res.body.error.code).toEqual(expect.any(String));
    expect(res.body.error.message).toContain(c.field);
    expect(res.body.error.details?.field).toBe(c.field);
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a 10 MB body is a 413 before it is read, and nothing is written', async () => {
    const body = Buffer.from(JSON.stringify({ topic: 'a.b', data: 'x'.repeat(10 * 1024 * 1024) }));
    const res = await postRaw(api.url, '/v1/notify', body, { authorization: `Bearer ${admin}`, 'content-type': 'application/json' });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'body_too_large', details: { field: 'body' } });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a malformed percent-encoding in the path is a 400', async () => {
    const res = await call(api.url, 'GET', '/v1/jobs/%E0%A4%A', { token: admin });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: expect.stringMatching(/^[a-z_]+$/), message: expect.stringMatching(/\S/) });
  });

  it('an unknown job is a 404 naming id', async () => {
    const res = await call(api.url, 'GET', `/v1/jobs/${randomUUID()}`, { token: admin });
    expect(res.status).toBe(404);
    expect(res.body.error.details.field).toBe('id');
  });

  it('an unknown route is a JSON 404', async () => {
    const res = await call(api.url, 'GET', '/v1/nothing-here');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});

describe('no input a client can send yields a 5xx', () => {
  const routes: Array<[string, string]> = [
    ['POST', '/v1/notify'],
    ['POST', '/v1/notify/batch'],
    ['POST', '/v1/jobs/redrive'],
    ['POST', `/v1/jobs/${randomUUID()}/retry`],
    ['POST', `/v1/jobs/${randomUUID()}/cancel`],
    ['POST', '/v1/endpoints/default/test'],
    ['POST', '/v1/endpoints/nope/test'],
    ['POST', '/v1/notifications/1/read'],
  ];
  const bodies: string[] = [
    'null',
    'true',
    '0',
    '"str"',
    '[]',
    '{}',
    '{"topic":null,"data":null}',
    '{"topic":"a.b","data":1e999}',
    '{"topic":"a.b","data":{"\\ud800":1}}',
    '{"topic":"a.b","data":"\\udfff\\ud800"}',
    '{"topic":"a.b","data":{},"recipients":["\\u0000"]}',
    '{"topic":"a.b","data":{},"recipients":["' + 'x'.repeat(5000) + '"]}',
    '{"topic":"' + 'a'.repeat(10_000) + '","data":{}}',
    '{"events":[' + Array.from({ length: 5 }, () => '{"topic":"a.b","data":{"\\u0000":"\\u0000"}}').join(',') + ']}',
    '{"status":"dead","since":"99999999999h"}',
    '{"status":"dead","since":"9999-12-31T23:59:59Z"}',
    '{"status":"dead","since":"0001-01-01T00:00:00Z"}',
    '{"status":"dead","topic":"a.b","endpoint":"\\ud800"}',
    '{"constructor":{"prototype":{"x":1}}}',
    '{"a":' + nested(5000) + '}',
    '\u0000',
    '{"topic":"a.b","data":"' + '\\\\'.repeat(1000) + '"}',
  ];
  for (const [method, path] of routes) {
    it(`${method} ${path.replace(/[0-9a-f-]{36}/, ':id')} survives ${bodies.length} hostile bodies`, async () => {
      for (const raw of bodies) {
        // Deliveries of what an earlier request was allowed to write settle first, so counts hold still.
        await settled();
        const pre = await rowCounts(db.pool);
        const res = await call(api.url, method, path, { token: admin, raw });
        // A refusal (4xx) is a JSON error with a code and a message, and writes no row in any table;
        // an acceptance answers a JSON object. One expect, naming the body, for every case.
        const refused = res.status >= 400;
        const err = res.body?.error as { code?: unknown; message?: unknown } | undefined;
        const shape = refused
          ? typeof err?.code === 'string' && /^[a-z_]+$/.test(err.code) && typeof err.message === 'string' && /\S/.test(err.message)
          : typeof res.body === 'object' && res.body !== null;
        const after = refused ? await rowCounts(db.pool) : pre;
        expect({
          raw: raw.slice(0, 80),
          status: res.status,
          below500: res.status < 500,
          shape,
          rows: after,
          text: res.text.slice(0, 200),
        }).toEqual({
          raw: raw.slice(0, 80),
          status: res.status,
          below500: true,
          shape: true,
          rows: pre,
          text: res.text.slice(0, 200),
        });
      }
    });
  }

  it('hostile query strings and headers on the read routes', async () => {
    const queries = [
      '?limit=-1',
      '?limit=1.5',
      '?limit=1e3',
      '?cursor=' + 'A'.repeat(5000),
      '?topic=%ff',
      '?since=1e30',
      '?event_id[]=x',
      '?a[b]=c',
      '?endpoint=%ED%A0%80',
    ];
    for (const path of ['/v1/jobs', '/v1/notifications', '/v1/endpoints', '/v1/alerts/stream']) {
      for (const q of queries) {
        const res = await call(api.url, 'GET', path + q, { token: admin });
        expect(res.status, `${path}${q} -> ${res.text}`).toBeLessThan(500);
      }
    }
    const odd = await call(api.url, 'GET', '/v1/jobs', { headers: { authorization: `Bearer ${'x'.repeat(10_000)}` } });
    expect(odd.status).toBe(401);
  });

  it('and none of it logged a server error or touched the users', async () => {
    // Row counts are checked around every refused request above; accepted ones (the 1e999 notify,
    // whose data becomes null, and the endpoint tests) write events, jobs and audit rows, never users.
    expect((await rowCounts(db.pool)).users).toBe(before.users);
    expect(api.events('http.error').filter((l) => (l.status as number) >= 500)).toEqual([]);
  });
});
