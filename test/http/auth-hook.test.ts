// The auth hook on its own (src/http/auth.ts): a Fastify app with made-up routes, tokens and
// sessions, answering through the server's error mapping. test/http/auth.test.ts checks the real
// routes' roles against the real service; this checks the hook's every branch, without a database.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/admin/users.js';
import { cookieValue, installAuth, principalOf, type SessionAuth } from '../../src/http/auth.js';
import { mapError } from '../../src/http/errors.js';
import { ACCESS } from '../../src/roles.js';

const { admin: ADMIN, read: READ, notify: SERVICE } = ACCESS;

const people: Record<string, Principal> = {
  'tok-admin': { id: '1', name: 'ada', role: 'admin' },
  'tok-viewer': { id: '2', name: 'vic', role: 'viewer' },
  'tok-service': { id: '3', name: 'svc', role: 'service' },
};
const sessionsById: Record<string, Principal> = { 'sid-viewer': people['tok-viewer']!, 'sid-admin': people['tok-admin']! };
const DASHBOARD = 'http://dashboard.test';

/** What the hook was asked, so a test can tell which path it took. */
const asked: { tokens: string[]; sessions: string[] } = { tokens: [], sessions: [] };

const who = async (req: Parameters<typeof principalOf>[0]) => ({ name: principalOf(req).name });

async function app(withSessions: boolean): Promise<FastifyInstance> {
  const a = Fastify();
  a.setErrorHandler((err, _req, reply) => {
    const m = mapError(err, 1024);
    return reply.code(m.status).headers(m.headers).send(m.body);
  });
  const sessions: SessionAuth = {
    authenticate: async (sid) => {
      asked.sessions.push(sid);
      return sessionsById[sid] ?? null;
    },
    sameOrigin: (req) => req.headers.origin === DASHBOARD,
  };
  installAuth(
    a,
    {
      authenticate: async (token) => {
        asked.tokens.push(token);
        return people[token] ?? null;
      },
    },
    withSessions ? sessions : undefined,
  );
  a.get('/public', async (req) => ({ principal: req.principal }));
  a.get('/public/who', who);
  a.get('/read', { config: { roles: READ } }, who);
  a.post('/admin', { config: { roles: ADMIN } }, who);
  a.post('/service', { config: { roles: SERVICE } }, who);
  a.post('/any', { config: { roles: 'any' } }, who);
  a.options('/any', { config: { roles: 'any' } }, who);
  await a.ready();
  return a;
}

let withSessions: FastifyInstance;
let tokensOnly: FastifyInstance;
beforeAll(async () => {
  withSessions = await app(true);
  tokensOnly = await app(false);
});
afterAll(async () => {
  await withSessions.close();
  await tokensOnly.close();
});

async function send(a: FastifyInstance, method: 'GET' | 'POST' | 'HEAD' | 'OPTIONS', url: string, headers: Record<string, string> = {}) {
  asked.tokens = [];
  asked.sessions = [];
  const res = await a.inject({ method, url, headers });
  return { status: res.statusCode, body: res.body === '' ? undefined : res.json(), headers: res.headers };
}

describe('bearer tokens', () => {
  it.each([
    ['Bearer tok-viewer', 'vic'],
    ['bearer tok-viewer', 'vic'],
    ['BEARER tok-viewer', 'vic'],
    ['Bearer    tok-viewer', 'vic'],
    ['Bearer tok-viewer  ', 'vic'],
    ['Bearer tok-viewer\t', 'vic'],
  ])('%j is read as the token', async (authorization, name) => {
    const res = await send(tokensOnly, 'GET', '/read', { authorization });
    expect([res.status, res.body]).toEqual([200, { name }]);
    expect(asked.tokens).toEqual(['tok-viewer']);
  });

  it.each([
    [undefined, 'authorization: missing (expected "Bearer <token>")'],
    ['Basic dXNlcjpwYXNz', 'authorization: expected "Bearer <token>"'],
    ['tok-viewer', 'authorization: expected "Bearer <token>"'],
    ['Bearertok-viewer', 'authorization: expected "Bearer <token>"'],
    ['XBearer tok-viewer', 'authorization: expected "Bearer <token>"'],
    ['Bearer tok-viewer extra', 'authorization: expected "Bearer <token>"'],
    ['Bearer ', 'authorization: empty token'],
    ['Bearer    ', 'authorization: empty token'],
    ['Bearer tok-nobody', 'authorization: unknown or revoked token'],
  ])('%j is a 401 with a Bearer challenge: %s', async (authorization, message) => {
    const res = await send(tokensOnly, 'GET', '/read', authorization === undefined ? {} : { authorization });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: 'unauthorized', message, details: { field: 'authorization' } } });
    expect(res.headers['www-authenticate']).toBe('Bearer');
    // Only a well-formed token is looked up.
    expect(asked.tokens).toEqual(authorization === 'Bearer tok-nobody' ? ['tok-nobody'] : []);
  });
});

describe('roles', () => {
  const refused = { error: { code: 'forbidden' } };
  it.each([
    ['/admin', 'tok-admin', 200, { name: 'ada' }],
    ['/admin', 'tok-viewer', 403, refused],
    ['/admin', 'tok-service', 403, refused],
    ['/service', 'tok-service', 200, { name: 'svc' }],
    ['/service', 'tok-admin', 200, { name: 'ada' }],
    ['/service', 'tok-viewer', 403, refused],
    ['/any', 'tok-viewer', 200, { name: 'vic' }],
    ['/any', 'tok-service', 200, { name: 'svc' }],
  ] as const)('POST %s with %s -> %i', async (url, token, status, body) => {
    const res = await send(tokensOnly, 'POST', url, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject(body);
  });

  it('a refusal names the role, the method, the route and the roles allowed', async () => {
    const res = await send(tokensOnly, 'POST', '/admin', { authorization: 'Bearer tok-viewer' });
    expect(res.body).toEqual({
      error: { code: 'forbidden', message: 'role viewer may not POST /admin', details: { role: 'viewer', allowed: ['admin'] } },
    });
    const read = await send(tokensOnly, 'GET', '/read', { authorization: 'Bearer tok-service' });
    expect(read.body.error.details).toEqual({ role: 'service', allowed: ['viewer', 'admin'] });
  });

  it('a route without roles is public: nobody is asked, even with a bad header, and it has no principal', async () => {
    const res = await send(tokensOnly, 'GET', '/public', { authorization: 'Basic nonsense' });
    expect([res.status, res.body]).toEqual([200, { principal: null }]);
    expect(asked.tokens).toEqual([]);
  });

  it('principalOf on a public route is a 401, not a crash', async () => {
    const res = await send(tokensOnly, 'GET', '/public/who', { authorization: 'Bearer tok-admin' });
    expect(res.status).toBe(401);
    expect(res.body.error).toEqual({ code: 'unauthorized', message: 'authorization: required' });
  });
});

// The name the sessions route sets in the browser (src/http/routes/sessions.ts).
const cookie = (sid: string) => `theme=dark; acw_session=${sid}`;

describe('the session cookie', () => {
  it('a GET with the cookie is the session user; the token path is not taken', async () => {
    const res = await send(withSessions, 'GET', '/read', { cookie: cookie('sid-viewer') });
    expect([res.status, res.body]).toEqual([200, { name: 'vic' }]);
    expect(asked).toEqual({ sessions: ['sid-viewer'], tokens: [] });
  });

  it('a state-changing request needs the dashboard origin; safe methods do not', async () => {
    const foreign = await send(withSessions, 'POST', '/any', { cookie: cookie('sid-admin'), origin: 'http://evil.test' });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toEqual({
      code: 'forbidden',
      message: 'origin: a signed-in request that changes state must come from the dashboard itself',
      details: { field: 'origin' },
    });
    // Refused before the session is looked up.
    expect(asked.sessions).toEqual([]);
    const none = await send(withSessions, 'POST', '/any', { cookie: cookie('sid-admin') });
    expect(none.status).toBe(403);

    const own = await send(withSessions, 'POST', '/admin', { cookie: cookie('sid-admin'), origin: DASHBOARD });
    expect([own.status, own.body]).toEqual([200, { name: 'ada' }]);
    for (const method of ['GET', 'HEAD'] as const) {
      expect((await send(withSessions, method, '/read', { cookie: cookie('sid-viewer'), origin: 'http://evil.test' })).status).toBe(200);
    }
    expect((await send(withSessions, 'OPTIONS', '/any', { cookie: cookie('sid-viewer'), origin: 'http://evil.test' })).status).toBe(200);
  });

  it('an unknown or expired session is a 401 naming the session, with no Bearer challenge', async () => {
    const res = await send(withSessions, 'GET', '/read', { cookie: cookie('sid-gone') });
    expect(res.status).toBe(401);
    expect(res.body.error).toEqual({
      code: 'unauthorized',
      message: 'session: expired or signed out; sign in again',
      details: { field: 'session' },
    });
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  it('an Authorization header wins over the cookie', async () => {
    const res = await send(withSessions, 'GET', '/read', { cookie: cookie('sid-admin'), authorization: 'Bearer tok-viewer' });
    expect([res.status, res.body]).toEqual([200, { name: 'vic' }]);
    expect(asked).toEqual({ sessions: [], tokens: ['tok-viewer'] });
    const bad = await send(withSessions, 'GET', '/read', { cookie: cookie('sid-admin'), authorization: 'Bearer ' });
    expect(bad.status).toBe(401);
  });

  it('a request with other cookies only is asked for a token', async () => {
    const res = await send(withSessions, 'GET', '/read', { cookie: 'theme=dark' });
    expect(res.status).toBe(401);
    expect(res.body.error.message).toBe('authorization: missing (expected "Bearer <token>")');
    expect(asked.sessions).toEqual([]);
  });

  it('without session support (a worker) the cookie is ignored', async () => {
    const res = await send(tokensOnly, 'GET', '/read', { cookie: cookie('sid-admin') });
    expect(res.status).toBe(401);
    expect(res.body.error.details).toEqual({ field: 'authorization' });
  });
});

describe('cookieValue', () => {
  it.each([
    ['acw_session=abc', 'abc'],
    ['theme=dark; acw_session=abc; lang=en', 'abc'],
    ['theme=dark;acw_session= abc ;lang=en', 'abc'],
    ['  acw_session  =abc', 'abc'],
    ['acw_session=a=b', 'a=b'],
    ['acw_session=', ''],
    ['x_acw_session=abc', undefined],
    ['acw_session_old=abc', undefined],
    ['acw_sessionx', undefined],
    ['=acw_session; acw_session', undefined],
    ['theme=dark', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('%j -> %j', (header, value) => {
    expect(cookieValue(header, 'acw_session')).toBe(value);
  });

  it('takes the first of two', () => {
    expect(cookieValue('acw_session=one; acw_session=two', 'acw_session')).toBe('one');
  });
});
