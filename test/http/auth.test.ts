import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { call, insertJob, makeUser, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } });
  for (const role of ['admin', 'viewer', 'service'] as const) tokens[role] = await makeUser(db.pool, `${role}-user`, role);
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});

type Role = 'admin' | 'viewer' | 'service';

async function ownNotification(role: Role): Promise<number> {
  const res = await db.pool.query<{ id: string }>(
    `insert into notifications (user_id, topic, data) select id, 'a.b', '{}' from users where name = $1 returning id`,
    [`${role}-user`],
  );
  return Number(res.rows[0]!.id);
}

interface Row {
  route: string;
  method: string;
  /** Built per call, so a state-changing route always has a fresh target. */
  path: (role: Role) => Promise<string> | string;
  body?: unknown;
  expect: Record<Role, number>;
}

const table: Row[] = [
  {
    route: 'POST /v1/notify',
    method: 'POST',
    path: () => '/v1/notify',
    body: { topic: 'a.b', data: {} },
    expect: { service: 202, admin: 202, viewer: 403 },
  },
  {
    route: 'POST /v1/notify/batch',
    method: 'POST',
    path: () => '/v1/notify/batch',
    body: { events: [{ topic: 'a.b', data: 1 }] },
    expect: { service: 202, admin: 202, viewer: 403 },
  },
  { route: 'GET /v1/jobs', method: 'GET', path: () => '/v1/jobs', expect: { service: 403, admin: 200, viewer: 200 } },
  {
    route: 'GET /v1/jobs/:id',
    method: 'GET',
    path: async () => `/v1/jobs/${await insertJob(db.pool, { status: 'completed' })}`,
    expect: { service: 403, admin: 200, viewer: 200 },
  },
  {
    route: 'POST /v1/jobs/:id/retry',
    method: 'POST',
    path: async () => `/v1/jobs/${await insertJob(db.pool, { status: 'completed' })}/retry`,
    expect: { service: 403, admin: 200, viewer: 403 },
  },
  {
    route: 'POST /v1/jobs/:id/cancel',
    method: 'POST',
    path: async () => `/v1/jobs/${await insertJob(db.pool, { status: 'pending' })}/cancel`,
    expect: { service: 403, admin: 200, viewer: 403 },
  },
  {
    route: 'POST /v1/jobs/redrive',
    method: 'POST',
    path: () => '/v1/jobs/redrive',
    body: { status: 'dead', dry_run: true },
    expect: { service: 403, admin: 200, viewer: 403 },
  },
  { route: 'GET /v1/endpoints', method: 'GET', path: () => '/v1/endpoints', expect: { service: 200, admin: 200, viewer: 200 } },
  {
    route: 'POST /v1/endpoints/:name/test',
    method: 'POST',
    path: () => '/v1/endpoints/default/test',
    expect: { service: 403, admin: 202, viewer: 403 },
  },
  { route: 'GET /v1/notifications', method: 'GET', path: () => '/v1/notifications', expect: { service: 200, admin: 200, viewer: 200 } },
  {
    route: 'POST /v1/notifications/:id/read',
    method: 'POST',
    path: async (role) => `/v1/notifications/${await ownNotification(role)}/read`,
    expect: { service: 200, admin: 200, viewer: 200 },
  },
];

describe('roles, route by route', () => {
  for (const row of table) {
    for (const role of ['service', 'viewer', 'admin'] as const) {
      it(`${row.route} as ${role} -> ${row.expect[role]}`, async () => {
        const res = await call(api.url, row.method, await row.path(role), { token: tokens[role], body: row.body });
        expect({ status: res.status, body: res.text }).toMatchObject({ status: row.expect[role] });
        // Every refusal names the code; a success has no error.
        expect(res.body?.error?.code).toBe(row.expect[role] === 403 ? 'forbidden' : undefined);
      });
    }
    it(`${row.route} without a token -> 401`, async () => {
      const res = await call(api.url, row.method, await row.path('admin'), { body: row.body });
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ code: 'unauthorized', details: { field: 'authorization' } });
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    });
  }

  it.each([
    ['viewer', 200, 'text/event-stream; charset=utf-8'],
    ['admin', 200, 'text/event-stream; charset=utf-8'],
    ['service', 403, 'application/json; charset=utf-8'],
  ] as const)('GET /v1/alerts/stream as %s -> %i', async (role, status, type) => {
    const ctl = new AbortController();
    const res = await fetch(`${api.url}/v1/alerts/stream`, { headers: { authorization: `Bearer ${tokens[role]}` }, signal: ctl.signal });
    expect([res.status, res.headers.get('content-type')]).toEqual([status, type]);
    ctl.abort();
    await res.body?.cancel().catch(() => undefined);
  });

  it('health, readiness and metrics need no token', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) expect((await call(api.url, 'GET', path)).status).toBe(200);
  });
});

describe('tokens', () => {
  it.each([
    ['no header', undefined],
    ['an empty bearer token', 'Bearer '],
    ['an unknown token', 'Bearer acw_not-a-real-token'],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a bare token without the scheme', 'acw_abc'],
  ])('%s is a 401', async (_name, header) => {
    const res = await call(api.url, 'GET', '/v1/notifications', header === undefined ? {} : { headers: { authorization: header } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });

  it('a revoked user is refused on the very next request', async () => {
    const token = await makeUser(db.pool, 'soon-gone', 'viewer');
    expect((await call(api.url, 'GET', '/v1/jobs', { token })).status).toBe(200);
    const { revokeUser } = await import('../../src/admin/users.js');
    await revokeUser(db.pool, 'soon-gone', 'admin-user');
    const res = await call(api.url, 'GET', '/v1/jobs', { token });
    expect(res.status).toBe(401);
    const audit = await db.pool.query(`select actor, target_id from audit_log where action = 'user.revoke'`);
    expect(audit.rows).toEqual([{ actor: 'admin-user', target_id: 'soon-gone' }]);
  });

  it('the token is never echoed in an error or a log line', async () => {
    const res = await call(api.url, 'GET', '/v1/jobs', { token: tokens.service });
    expect(res.status).toBe(403);
    expect(res.text).not.toContain(tokens.service);
    expect(JSON.stringify(api.events('http.error'))).not.toContain(tokens.service);
  });
});
