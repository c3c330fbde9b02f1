import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeUser } from '../../src/admin/users.js';
import { CSP, DASHBOARD_DIR } from '../../src/http/routes/dashboard.js';
import { Sessions } from '../../src/http/routes/sessions.js';
import { hashToken } from '../../src/users.js';
import { call, insertJob, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

// Dashboard sign-in and the cookie it sets, cookie auth beside bearer tokens, the Origin check, and
// the static files with their CSP (docs/operations.md#dashboard). The browser suite
// (test/browser/) drives the pages themselves.

let db: TestDatabase;
let api: Api;
let admin: string;
let viewer: string;
let service: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db, { server: { session_ttl: '1h' } });
  admin = await makeUser(db.pool, 'ada', 'admin');
  viewer = await makeUser(db.pool, 'vic', 'viewer');
  service = await makeUser(db.pool, 'svc', 'service');
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** Sign in and return the session cookie (`acw_session=...`) and the whole Set-Cookie header. */
async function signIn(token: string, headers: Record<string, string> = {}): Promise<{ cookie: string; setCookie: string }> {
  const res = await call(api.url, 'POST', '/v1/session', { body: { token }, headers });
  expect(res.status).toBe(200);
  const setCookie = res.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0]!, setCookie };
}

const origin = (): string => api.url;
const req = (o: string, h = 'internal:8080') => ({ headers: { origin: o, host: h } }) as never;
const host = (): string => new URL(api.url).host;

describe('sign-in', () => {
  it('trades a token for a session cookie: HttpOnly, SameSite=Strict, not Secure over http, holding no token', async () => {
    const res = await call(api.url, 'POST', '/v1/session', { body: { token: admin }, headers: { origin: origin() } });
    expect(res.status).toBe(200);
    expect(res.body.user).toEqual({ name: 'ada', role: 'admin' });
    const expires = new Date(res.body.expires_at).getTime();
    expect(expires).toBeGreaterThan(Date.now() + 50 * 60_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 61 * 60_000);
    const setCookie = res.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^acw_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=3600$/);
    expect(setCookie).not.toContain(admin);
    expect(res.text).not.toContain(admin);
    // Stored hashed: the row holds the id's SHA-256, never the id or the token.
    const id = setCookie.split(';')[0]!.split('=')[1]!;
    const rows = await db.pool.query<{ id_hash: string }>(
      `select id_hash from sessions s join users u on u.id = s.user_id where u.name = 'ada' order by s.created_at desc limit 1`,
    );
    expect(rows.rows[0]!.id_hash).toBe(hashToken(id));
    expect(api.events('session.opened').at(-1)).toMatchObject({ user: 'ada', role: 'admin' });
    expect(JSON.stringify(api.events('session.opened'))).not.toContain(id);
  });

  it('a wrong token is a 401 naming token; a service token is refused; a foreign Origin is refused; nothing is stored', async () => {
    const before = (await db.pool.query(`select count(*)::int as n from sessions`)).rows[0].n;
    const wrong = await call(api.url, 'POST', '/v1/session', { body: { token: 'acw_nope' } });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({
      code: 'unauthorized',
      message: 'token: unknown or revoked token',
      details: { field: 'token' },
    });
    expect(wrong.headers.get('set-cookie')).toBeNull();
    const svc = await call(api.url, 'POST', '/v1/session', { body: { token: service } });
    expect(svc.status).toBe(403);
    expect(svc.body.error.message).toMatch(/^token: role service cannot sign in/);
    const empty = await call(api.url, 'POST', '/v1/session', { body: {} });
    expect(empty.status).toBe(400);
    expect(empty.body.error.details.field).toBe('token');
    const foreign = await call(api.url, 'POST', '/v1/session', { body: { token: admin }, headers: { origin: 'https://evil.example.com' } });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.details.field).toBe('origin');
    expect((await db.pool.query(`select count(*)::int as n from sessions`)).rows[0].n).toBe(before);
  });

  it('Secure when server.public_url is https, and that origin counts as our own', () => {
    const s = new Sessions(api.svc, 'https://acw.example.com/ops/');
    expect(s.cookie('abc', 60)).toBe('acw_session=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure');
    expect(s.sameOrigin(req('https://acw.example.com'))).toBe(true);
    expect(s.sameOrigin(req('https://evil.example.com'))).toBe(false);
    expect(s.sameOrigin(req('null'))).toBe(false);
    expect(new Sessions(api.svc, '').cookie('abc', 60)).not.toContain('Secure');
  });
});

describe('cookie auth', () => {
  it('reads with the cookie, says who is signed in, and keeps roles: a viewer is refused an action', async () => {
    const a = await signIn(admin);
    const me = await call(api.url, 'GET', '/v1/session', { headers: { cookie: a.cookie } });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ user: { name: 'ada', role: 'admin' } });
    expect((await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: a.cookie } })).status).toBe(200);

    const v = await signIn(viewer);
    expect((await call(api.url, 'GET', '/v1/endpoints', { headers: { cookie: v.cookie } })).status).toBe(200);
    const pause = await call(api.url, 'POST', '/v1/endpoints/default/pause', { headers: { cookie: v.cookie, origin: origin() } });
    expect(pause.status).toBe(403);
    expect(pause.body.error).toMatchObject({ code: 'forbidden', details: { role: 'viewer' } });
    const id = await insertJob(db.pool, { status: 'dead' });
    const retry = await call(api.url, 'POST', `/v1/jobs/${id}/retry`, { headers: { cookie: v.cookie, origin: origin() } });
    expect(retry.status).toBe(403);
    expect((await db.pool.query(`select status from jobs where id = $1`, [id])).rows[0].status).toBe('dead');
  });

  it('a state-changing request with the cookie needs our Origin; GETs and bearer requests do not', async () => {
    const { cookie } = await signIn(admin);
    const id = await insertJob(db.pool, { status: 'dead' });
    for (const headers of <Array<Record<string, string>>>[
      { cookie },
      { cookie, origin: 'https://evil.example.com' },
      { cookie, origin: 'null' },
    ]) {
      const res = await call(api.url, 'POST', `/v1/jobs/${id}/retry`, { headers });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'forbidden', details: { field: 'origin' } });
    }
    expect((await db.pool.query(`select status from jobs where id = $1`, [id])).rows[0].status).toBe('dead');
    // The browser's own origin, as the Host it reached us at.
    const ok = await call(api.url, 'POST', `/v1/jobs/${id}/retry`, { headers: { cookie, origin: `http://${host()}` } });
    expect(ok.status).toBe(200);
    // A bearer token is no ambient credential: no Origin needed, and it wins over a cookie.
    const id2 = await insertJob(db.pool, { status: 'dead' });
    expect((await call(api.url, 'POST', `/v1/jobs/${id2}/retry`, { token: admin })).status).toBe(200);
    const v = await signIn(viewer);
    const id3 = await insertJob(db.pool, { status: 'dead' });
    expect((await call(api.url, 'POST', `/v1/jobs/${id3}/retry`, { token: admin, headers: { cookie: v.cookie } })).status).toBe(200);
  });

  it('an unknown, expired, signed-out or malformed session is a 401 JSON answer', async () => {
    const bad = await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: 'acw_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } });
    expect(bad.status).toBe(401);
    expect(bad.body.error).toMatchObject({ code: 'unauthorized', details: { field: 'session' } });
    expect((await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: 'acw_session=<script>' } })).status).toBe(401);

    const e = await signIn(admin);
    await db.pool.query(`update sessions set expires_at = now() - interval '1 second' where id_hash = $1`, [
      hashToken(e.cookie.split('=')[1]!),
    ]);
    expect((await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: e.cookie } })).status).toBe(401);

    const o = await signIn(admin);
    const foreignOut = await call(api.url, 'DELETE', '/v1/session', { headers: { cookie: o.cookie, origin: 'https://evil.example.com' } });
    expect(foreignOut.status).toBe(403);
    expect((await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: o.cookie } })).status).toBe(200);
    const out = await call(api.url, 'DELETE', '/v1/session', { headers: { cookie: o.cookie, origin: origin() } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^acw_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0/);
    expect((await call(api.url, 'GET', '/v1/jobs', { headers: { cookie: o.cookie } })).status).toBe(401);
  });

  it('sessions end when their user is revoked or given a new token, and stay ended after a re-add', async () => {
    const token = await makeUser(db.pool, 'rita', 'admin');
    const s1 = await signIn(token);
    const s2 = await signIn(token);
    expect((await call(api.url, 'GET', '/v1/session', { headers: { cookie: s1.cookie } })).status).toBe(200);
    await revokeUser(db.pool, 'rita', 'test');
    expect(
      (await db.pool.query(`select count(*)::int as n from sessions s join users u on u.id = s.user_id where u.name = 'rita'`)).rows[0].n,
    ).toBe(0);
    for (const s of [s1, s2]) expect((await call(api.url, 'GET', '/v1/session', { headers: { cookie: s.cookie } })).status).toBe(401);
    // Granted again (a new token): the old sessions do not come back.
    const again = await makeUser(db.pool, 'rita', 'admin');
    expect((await call(api.url, 'GET', '/v1/session', { headers: { cookie: s1.cookie } })).status).toBe(401);
    const s3 = await signIn(again);
    // A new token without a revoke (a bootstrap token changed in the config) ends them too.
    await makeUser(db.pool, 'rita', 'admin');
    expect((await call(api.url, 'GET', '/v1/session', { headers: { cookie: s3.cookie } })).status).toBe(401);
  });
});

describe('the dashboard files', () => {
  it('/ is the built page with a strict CSP and no inline script; assets are cached for good', async () => {
    const res = await fetch(`${api.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toBe(CSP);
    expect(CSP).toContain("script-src 'self'");
    expect(CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const page = await res.text();
    // Every script has a src of our own, and nothing is loaded from elsewhere.
    const scripts = [...page.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attrs, body] of scripts) {
      expect(attrs).toMatch(/src="\.\/assets\/[\w.-]+\.js"/);
      expect(body!.trim()).toBe('');
    }
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
    const assets = [...page.matchAll(/(?:src|href)="\.\/(assets\/[\w.-]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css'))).toBe(true);
    let gzipped = 0;
    let code = '';
    for (const a of assets) {
      const r = await fetch(`${api.url}/${a}`);
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(r.headers.get('content-security-policy')).toBe(CSP);
      const body = Buffer.from(await r.arrayBuffer());
      expect(body.equals(readFileSync(`${DASHBOARD_DIR}${a}`))).toBe(true);
      // No request to another host from the code either.
      if (a.endsWith('.js')) code += body.toString();
      gzipped += gzipSync(body, { level: 9 }).length;
    }
    expect(code).not.toMatch(/fetch\(["'`]https?:|EventSource\(["'`]https?:/);
    expect(gzipped).toBeLessThanOrEqual(150 * 1024);
  });

  it('an unknown asset or path is a JSON 404, and /v1 errors stay JSON', async () => {
    const asset = await call(api.url, 'GET', '/assets/../../package.json');
    expect(asset.status).toBe(404);
    expect(asset.body.error.code).toBe('not_found');
    const missing = await call(api.url, 'GET', '/assets/nope.js');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
    const v1 = await call(api.url, 'GET', '/v1/nope', { headers: { cookie: 'acw_session=x' } });
    expect(v1.status).toBe(404);
    expect(v1.headers.get('content-type')).toMatch(/^application\/json/);
  });
});

describe('GET /v1/stats', () => {
  it('queue depth by status, the oldest due job, and attempts per bucket with the failure rate', async () => {
    const jobId = await insertJob(db.pool, { status: 'pending' });
    // Overdue, and of a type no handler of the running service takes, so no worker moves it meanwhile.
    await db.pool.query(`update jobs set run_at = now() - interval '90 seconds', type = 'test.unclaimed' where id = $1`, [jobId]);
    await db.pool.query(
      `insert into webhook_attempts (job_id, attempt, endpoint, status_code, error_kind, duration_ms, created_at)
       values ($1, 1, 'default', 200, null, 5, now()), ($1, 2, 'default', 500, 'http_status', 5, now()),
              ($1, 3, 'default', null, 'timeout', 5, now()), ($1, 4, 'default', 204, null, 5, now() - interval '2 hours')`,
      [jobId],
    );
    // A second statement adds to the same minute's counts; an attempt aborted by a shutdown is not counted.
    await db.pool.query(
      `insert into webhook_attempts (job_id, attempt, endpoint, status_code, error_kind, duration_ms, aborted)
       values ($1, 5, 'default', 200, null, 5, false), ($1, 6, 'default', null, 'aborted', 5, true)`,
      [jobId],
    );
    // A completed and a cancelled job of two days ago are no longer counted.
    const old = await insertJob(db.pool, { status: 'completed', updatedAgoMs: 2 * 86_400_000 });
    await db.pool.query(`update jobs set completed_at = now() - interval '2 days' where id = $1`, [old]);
    await insertJob(db.pool, { status: 'cancelled', updatedAgoMs: 2 * 86_400_000 });
    const dbCounts = async () => {
      const counts = await db.pool.query<{ status: string; n: number }>(
        `select status, count(*)::int as n from jobs
         where status in ('pending', 'running', 'dead') or coalesce(completed_at, updated_at) > now() - interval '1 day' group by status`,
      );
      const want = Object.fromEntries(counts.rows.map((r) => [r.status, r.n]));
      return {
        pending: want.pending ?? 0,
        running: want.running ?? 0,
        dead: want.dead ?? 0,
        completed_24h: want.completed ?? 0,
        cancelled_24h: want.cancelled ?? 0,
      };
    };
    // The running service's worker may move the jobs of earlier tests between two reads: compare an
    // answer with the table read just before and just after it, once the two agree.
    const { hour, want } = await waitFor(async () => {
      const before = await dbCounts();
      const answer = await call(api.url, 'GET', '/v1/stats', { token: viewer });
      const after = await dbCounts();
      return JSON.stringify(before) === JSON.stringify(after) ? { hour: answer, want: after } : undefined;
    });
    expect(hour.status).toBe(200);
    expect(hour.body.queue).toEqual(want);
    expect(hour.body.queue.pending).toBeGreaterThan(0);
    expect(hour.body.oldest_due.age_seconds).toBeGreaterThanOrEqual(89);
    expect(hour.body.deliveries).toMatchObject({ window: '1h', bucket_seconds: 60, total: 4, failed: 2 });
    expect(hour.body.deliveries.failure_rate).toBeCloseTo(2 / 4);
    expect(hour.body.deliveries.buckets.reduce((n: number, b: { ok: number }) => n + b.ok, 0)).toBe(2);
    const day = await call(api.url, 'GET', '/v1/stats?window=24h', { token: viewer });
    expect(day.body.deliveries).toMatchObject({ window: '24h', bucket_seconds: 900, total: 5, failed: 2 });
    // Buckets start on their boundary: 15-minute ones at :00, :15, :30, :45.
    for (const b of day.body.deliveries.buckets) expect(new Date(b.at).getTime() % 900_000).toBe(0);
    const bad = await call(api.url, 'GET', '/v1/stats?window=7d', { token: viewer });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe('window: expected 1h or 24h');
    expect((await call(api.url, 'GET', '/v1/stats', { token: service })).status).toBe(403);
  });
});

describe('GET /v1/jobs created_after / created_before', () => {
  it('keeps the jobs created in the range, each end an instant or a duration ago, and names a malformed one', async () => {
    const topic = 'range.test';
    const old = await insertJob(db.pool, { status: 'completed', topic, createdAgoMs: 3 * 3_600_000 });
    const mid = await insertJob(db.pool, { status: 'completed', topic, createdAgoMs: 90 * 60_000 });
    const recent = await insertJob(db.pool, { status: 'completed', topic, createdAgoMs: 60_000 });
    const ids = async (q: string): Promise<string[]> => {
      const res = await call(api.url, 'GET', `/v1/jobs?topic=${topic}${q}`, { token: viewer });
      expect(res.status).toBe(200);
      return res.body.items.map((j: { id: string }) => j.id);
    };
    expect(await ids('')).toEqual([recent, mid, old]);
    expect(await ids('&created_after=2h')).toEqual([recent, mid]);
    expect(await ids('&created_before=1h')).toEqual([mid, old]);
    expect(await ids('&created_after=2h&created_before=1h')).toEqual([mid]);
    const at = new Date(Date.now() - 2 * 3_600_000).toISOString();
    expect(await ids(`&created_after=${at}`)).toEqual([recent, mid]);
    const bad = await call(api.url, 'GET', '/v1/jobs?created_after=yesterday', { token: viewer });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe('created_after: expected an RFC 3339 time or a duration like "1h"');
  });
});
