// Endpoints managed at run time (docs/operations.md#endpoints-at-run-time): created, changed and
// deleted through the API, live in every process within a second, against real PostgreSQL and a
// real receiver.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { EndpointNameClash } from '../../src/endpoints/registry.js';
import { codecOf } from '../../src/endpoints/store.js';
import { notifyNow } from '../../src/notify/notify.js';
import { verifyWebhook } from '../../src/verify.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

/** The real secret box, as the service uses it: a value sealed under the wrong context does not open. */
const codec = codecOf(new SecretBox(randomBytes(32)))!;

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let viewer: string;
let svcToken: string;
let otherSvc: string;

/** Whether `secret` made this one signature header of a delivery (the other left out). */
function signedBy(secret: string, req: ReceivedRequest, header: 'x-acw-signature' | 'x-acw-signature-next'): boolean {
  const { 'x-acw-signature-next': _next, ...headers } = req.headers;
  return verifyWebhook({ secret, headers: { ...headers, 'x-acw-signature': req.headers[header] }, body: req.body });
}

const CONFIG = (rxUrl: string) => ({
  notify: {
    webhook: {
      service_endpoints: { topics: ['billing.*'] },
      // The receivers are on 127.0.0.1, which the SSRF guard refuses for stored endpoints unless allowed.
      allow_networks: ['127.0.0.0/8'],
      endpoints: [{ name: 'from-config', url: `${rxUrl}/config`, secret: 'config-secret', topics: ['config.*'] }],
    },
  },
});

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, CONFIG(rx.url), 'serve', { secretCodec: codec });
  admin = await makeUser(db.pool, 'ep-admin', 'admin');
  viewer = await makeUser(db.pool, 'ep-viewer', 'viewer');
  svcToken = await makeUser(db.pool, 'billing-svc', 'service');
  otherSvc = await makeUser(db.pool, 'other-svc', 'service');
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});

describe('endpoints at run time', () => {
  it('an endpoint created over HTTP gets a verified delivery at once, and a second process delivers to it within a second', async () => {
    const second = await startTestService(db, CONFIG(rx.url), { secretCodec: codec });
    try {
      const created = await call(api.url, 'POST', '/v1/endpoints', {
        token: admin,
        body: { name: 'orders', url: `${rx.url}/orders`, topics: ['orders.*'], description: 'order events' },
      });
      expect(created.status).toBe(201);
      const at = Date.now();
      const secret = created.body.secret as string;
      expect(secret.length).toBeGreaterThanOrEqual(32);
      expect(created.body).toMatchObject({
        name: 'orders',
        source: 'api',
        owner: 'ep-admin',
        description: 'order events',
        topics: ['orders.*'],
      });
      // The row holds it sealed, never in the clear.
      const stored = await db.pool.query<{ secret: string }>(`select secret from endpoints where name = 'orders'`);
      expect(stored.rows[0]!.secret).not.toContain(secret);
      // The second process learns of it within its re-read interval (1 s), at once with the NOTIFY.
      await waitFor(() => second.svc.endpoints.some((e) => e.name === 'orders'), 5_000, 10);
      expect(Date.now() - at).toBeLessThan(2_000);

      // Delivered by this process (its API answered) and by the second one, each signed with the secret given once.
      const r1 = await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'orders.paid', data: { n: 1 } } });
      expect(r1.body.job_ids).toHaveLength(1);
      await notifyNow(second.svc.db.pool, { topic: 'orders.paid', data: { n: 2 } }, 'test', second.svc.fanOutContext);
      const got = await waitFor(() => {
        const hits = rx.requests.filter((r) => r.url === '/orders');
        return hits.length >= 2 ? hits : null;
      });
      for (const req of got) expect(verifyWebhook({ secret, headers: req.headers, body: req.body })).toBe(true);
      // No secret in any audit row.
      const audit = await db.pool.query<{ details: unknown }>(`select details from audit_log where target_id = 'orders'`);
      expect(JSON.stringify(audit.rows)).not.toContain(secret);
    } finally {
      await second.svc.stop();
    }
  });

  it('a change (topics, URL, enabled) reaches delivery at once, without a restart', async () => {
    const c = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'live', url: `${rx.url}/live-a`, topics: ['live.a'], secret: 'live-secret-0123456789' },
    });
    expect(c.status).toBe(201);
    expect(c.body.secret).toBe('live-secret-0123456789');
    const p = await call(api.url, 'PATCH', '/v1/endpoints/live', { token: admin, body: { url: `${rx.url}/live-b`, topics: ['live.b'] } });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ topics: ['live.b'] });
    const miss = await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'live.a', data: {} } });
    expect(miss.body.job_ids).toEqual([]);
    await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'live.b', data: {} } });
    await waitFor(() => rx.requests.some((r) => r.url === '/live-b'));
    const audit = await db.pool.query<{ details: { changed: Record<string, unknown> } }>(
      `select details from audit_log where action = 'endpoint.updated' and target_id = 'live' order by id`,
    );
    expect(Object.keys(audit.rows[0]!.details.changed).toSorted()).toEqual(['topics', 'url']);

    // enabled: false holds it: no new job fans out to it, and one queued already waits.
    const off = await call(api.url, 'PATCH', '/v1/endpoints/live', { token: admin, body: { enabled: false } });
    expect([off.status, off.body.enabled]).toEqual([200, false]);
    const skipped = await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'live.b', data: { n: 'while off' } } });
    expect([skipped.status, skipped.body.job_ids]).toEqual([202, []]);
    const hits = () => rx.requests.filter((r) => r.url === '/live-b').length;
    const delivered = hits();
    const [queued] = await api.svc.enqueue([
      { type: 'webhook.deliver', payload: { topic: 'live.b', body: '{"queued":"while off"}' }, maxAttempts: 3, endpoint: 'live' },
    ]);
    // A witness queued after it, for another endpoint, is delivered: the workers have gone past the held job.
    const w = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'witness', url: `${rx.url}/witness`, topics: ['witness.x'] },
    });
    expect(w.status).toBe(201);
    await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'witness.x', data: {} } });
    await waitFor(() => rx.requests.some((r) => r.url === '/witness'));
    const held = await db.pool.query<{ status: string; attempts: number }>(`select status, attempts from jobs where id = $1`, [queued]);
    expect(held.rows[0]).toEqual({ status: 'pending', attempts: 0 });
    expect(hits()).toBe(delivered);
    // Enabled again: the queued job goes out at once.
    const on = await call(api.url, 'PATCH', '/v1/endpoints/live', { token: admin, body: { enabled: true } });
    expect([on.status, on.body.enabled]).toEqual([200, true]);
    const [late] = await waitFor(() => {
      const got = rx.requests.filter((r) => r.url === '/live-b').slice(delivered);
      return got.length > 0 ? got : null;
    });
    expect(late!.body.toString()).toBe('{"queued":"while off"}');
  });

  it('a PATCH and a DELETE reach a second process without a restart', async () => {
    const second = await startTestService(db, CONFIG(rx.url), { secretCodec: codec });
    try {
      const c = await call(api.url, 'POST', '/v1/endpoints', {
        token: admin,
        body: { name: 'roaming', url: `${rx.url}/roam-a`, topics: ['roam.a'], headers: { 'X-Roam': 'one' } },
      });
      expect(c.status).toBe(201);
      await waitFor(() => second.svc.registry.byName.get('roaming')?.url === `${rx.url}/roam-a`);
      // Changed in the first process (its API); the second sees it on the NOTIFY (or its next look).
      const p = await call(api.url, 'PATCH', '/v1/endpoints/roaming', {
        token: admin,
        body: { url: `${rx.url}/roam-b`, topics: ['roam.b'], headers: { 'X-Roam': 'two' } },
      });
      expect(p.status).toBe(200);
      const ep = await waitFor(() => {
        const e = second.svc.registry.byName.get('roaming');
        return e?.url === `${rx.url}/roam-b` ? e : null;
      });
      expect([ep.topics, ep.headers]).toEqual([['roam.b'], { 'X-Roam': 'two' }]);
      // The second process fans out by what it knows now: the new topic, not the old one.
      const notify = (topic: string) => notifyNow(second.svc.db.pool, { topic, data: {} }, 'test', second.svc.fanOutContext);
      expect((await notify('roam.a')).body.job_ids).toEqual([]);
      expect((await notify('roam.b')).body.job_ids).toHaveLength(1);
      const [got] = await waitFor(() => {
        const hits = rx.requests.filter((r) => r.url === '/roam-b');
        return hits.length > 0 ? hits : null;
      });
      expect(got!.headers['x-roam']).toBe('two');

      const d = await call(api.url, 'DELETE', '/v1/endpoints/roaming', { token: admin });
      expect(d.status).toBe(200);
      await waitFor(() => !second.svc.registry.byName.has('roaming'));
      expect((await notify('roam.b')).body.job_ids).toEqual([]);
    } finally {
      await second.svc.stop();
    }
  });

  it('a viewer reads without secrets and changes nothing', async () => {
    const list = await call(api.url, 'GET', '/v1/endpoints', { token: viewer });
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).not.toMatch(/secret"\s*:/);
    expect(list.body.items.map((e: { name: string }) => e.name)).toContain('from-config');
    const before = await rowCounts(db.pool);
    for (const [method, path, body] of [
      ['POST', '/v1/endpoints', { name: 'nope', url: `${rx.url}/x`, topics: ['a.b'] }],
      ['PATCH', '/v1/endpoints/live', { description: 'x' }],
      ['DELETE', '/v1/endpoints/live', undefined],
    ] as const) {
      expect((await call(api.url, method, path, { token: viewer, ...(body ? { body } : {}) })).status).toBe(403);
    }
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a service creates only within its granted topics, and sees and changes only its own endpoints', async () => {
    const own = await call(api.url, 'POST', '/v1/endpoints', {
      token: svcToken,
      body: { name: 'billing-hooks', url: `${rx.url}/billing`, topics: ['billing.paid', 'billing.refund.*'] },
    });
    expect(own.status).toBe(201);
    expect(own.body.owner).toBe('billing-svc');
    const before = await rowCounts(db.pool);
    const wide = await call(api.url, 'POST', '/v1/endpoints', {
      token: svcToken,
      body: { name: 'spy', url: `${rx.url}/spy`, topics: ['*'] },
    });
    expect(wide.status).toBe(403);
    expect(wide.body.error.message).toMatch(/^topics\[0\]: "\*" is outside/);
    const sideways = await call(api.url, 'POST', '/v1/endpoints', {
      token: svcToken,
      body: { name: 'spy', url: `${rx.url}/spy`, topics: ['billing.paid', 'orders.*'] },
    });
    expect(sideways.status).toBe(403);
    expect(sideways.body.error.details.field).toBe('topics[1]');
    expect(await rowCounts(db.pool)).toEqual(before);
    // Only its own in the list; another service's endpoint is not found for it.
    const mine = await call(api.url, 'GET', '/v1/endpoints', { token: svcToken });
    expect(mine.body.items.map((e: { name: string }) => e.name)).toEqual(['billing-hooks']);
    expect((await call(api.url, 'GET', '/v1/endpoints', { token: otherSvc })).body.items).toEqual([]);
    expect((await call(api.url, 'PATCH', '/v1/endpoints/billing-hooks', { token: otherSvc, body: { description: 'x' } })).status).toBe(404);
    expect((await call(api.url, 'PATCH', '/v1/endpoints/orders', { token: svcToken, body: { description: 'x' } })).status).toBe(404);
    expect((await call(api.url, 'DELETE', '/v1/endpoints/orders', { token: svcToken })).status).toBe(404);
    expect((await call(api.url, 'PATCH', '/v1/endpoints/billing-hooks', { token: svcToken, body: { description: 'mine' } })).status).toBe(
      200,
    );
  });

  it('deleting with pending jobs is refused; ?force=true cancels them; the name stays reserved for the old jobs', async () => {
    await call(api.url, 'POST', '/v1/endpoints', { token: admin, body: { name: 'doomed', url: `${rx.url}/doomed`, topics: ['doomed.x'] } });
    expect((await call(api.url, 'POST', '/v1/endpoints/doomed/pause', { token: admin })).status).toBe(200);
    for (let i = 0; i < 3; i++) await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'doomed.x', data: { i } } });
    const refused = await call(api.url, 'DELETE', '/v1/endpoints/doomed', { token: admin });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'endpoint_has_jobs', details: { pending_jobs: 3 } });
    const forced = await call(api.url, 'DELETE', '/v1/endpoints/doomed?force=true', { token: admin });
    expect(forced.status).toBe(200);
    expect(forced.body).toEqual({ name: 'doomed', deleted: true, cancelled_jobs: 3 });
    const jobs = await db.pool.query<{ status: string }>(`select status from jobs where endpoint = 'doomed'`);
    expect(jobs.rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(api.svc.endpoints.some((e) => e.name === 'doomed')).toBe(false);
    const st = await db.pool.query(`select 1 from endpoint_state where endpoint = 'doomed'`);
    expect(st.rowCount).toBe(0);
    const again = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'doomed', url: `${rx.url}/d2`, topics: ['a.b'] },
    });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toMatch(/^name: doomed belonged to an endpoint deleted at .* kept for its old jobs until /);
  });

  it('bad input gets a 4xx naming the field and writes nothing', async () => {
    const ok = { name: 'fresh', url: `${rx.url}/fresh`, topics: ['a.b'] };
    const cases: Array<[Record<string, unknown>, number, RegExp]> = [
      [{ ...ok, url: 'ftp://h.example.com/x' }, 400, /^url: expected an http or https URL, got scheme "ftp"/],
      [{ ...ok, url: 'https://user:pw@h.example.com/x' }, 400, /^url: must not carry user-info/],
      [{ ...ok, url: `https://h.example.com/${'a'.repeat(2100)}` }, 400, /^url: must be at most 2048 characters/],
      [{ ...ok, topics: ['Bad.Topic'] }, 400, /^topics\[0\]: expected a topic/],
      [{ ...ok, timeout: '50ms' }, 400, /^timeout: must be from 100ms to 60s/],
      [{ ...ok, timeout: '61s' }, 400, /^timeout: must be from 100ms to 60s/],
      [{ ...ok, rate_limit: '5/h' }, 400, /^rate_limit: expected a rate like/],
      [{ ...ok, max_in_flight: 5000 }, 400, /^max_in_flight: must not exceed notify.webhook.max_in_flight_total/],
      [{ ...ok, colour: 'red' }, 400, /^colour: unknown field/],
      [{ ...ok, name: 'Bad Name' }, 400, /^name: expected an endpoint name/],
      [{ ...ok, name: 'orders' }, 409, /^name: an endpoint named orders exists already/],
      [{ ...ok, name: 'from-config' }, 409, /^name: an endpoint named from-config is defined in the config file/],
      [{ ...ok, scheme: 'standard', secret: 'not-a-whsec-secret-at-all' }, 400, /^secret: scheme "standard" needs/],
      // The SSRF guard: only 127.0.0.0/8 is opened here.
      [{ ...ok, url: 'http://169.254.169.254/latest/meta-data' }, 400, /^url: .*link-local/],
      [{ ...ok, url: 'http://10.1.2.3/hook' }, 400, /^url: .*(RFC 1918|private)/],
      [{ ...ok, url: 'http://[::ffff:192.168.0.1]/hook' }, 400, /^url: /],
    ];
    for (const [body, status, message] of cases) {
      const before = await rowCounts(db.pool);
      const r = await call(api.url, 'POST', '/v1/endpoints', { token: admin, body });
      expect({ body, status: r.status }).toEqual({ body, status });
      expect(r.body.error.message).toMatch(message);
      expect(await rowCounts(db.pool)).toEqual(before);
    }
    // A config endpoint can be paused through the API, not edited or deleted.
    const edit = await call(api.url, 'PATCH', '/v1/endpoints/from-config', { token: admin, body: { description: 'x' } });
    expect(edit.status).toBe(409);
    expect(edit.body.error.code).toBe('config_endpoint');
    expect((await call(api.url, 'DELETE', '/v1/endpoints/from-config', { token: admin })).status).toBe(409);
    expect((await call(api.url, 'PATCH', '/v1/endpoints/nowhere', { token: admin, body: { description: 'x' } })).status).toBe(404);
    expect((await call(api.url, 'PATCH', '/v1/endpoints/live', { token: admin, body: {} })).status).toBe(400);
  });

  it('a config endpoint named like a stored one is refused at start, naming both', async () => {
    await expect(
      startTestService(
        db,
        { notify: { webhook: { endpoints: [{ name: 'orders', url: `${rx.url}/o`, secret: 'x', topics: ['*'] }] } } },
        { secretCodec: codec },
      ),
    ).rejects.toThrow(EndpointNameClash);
  });

  it('without an encryption key, writes answer 503 naming the key; reads and config endpoints work', async () => {
    const bare = await startApi(db, CONFIG(rx.url), 'serve', { secretCodec: null });
    try {
      const r = await call(bare.url, 'POST', '/v1/endpoints', {
        token: admin,
        body: { name: 'nokey', url: `${rx.url}/k`, topics: ['a.b'] },
      });
      expect(r.status).toBe(503);
      expect(r.body.error).toMatchObject({ code: 'encryption_key_missing', details: { key: 'secrets.encryption_key' } });
      expect((await call(bare.url, 'GET', '/v1/endpoints', { token: admin })).status).toBe(200);
      // Stored endpoints are held there (their secret cannot be opened), never sent unsigned.
      expect(bare.svc.endpoints.find((e) => e.name === 'orders')?.enabled).toBe(false);
      expect(bare.svc.endpoints.find((e) => e.name === 'from-config')?.enabled).toBe(true);
    } finally {
      await bare.close();
    }
  });

  it('rotate-secret: the old secret keeps signing, the new one signs beside it until the overlap ends; neither is audited', async () => {
    const old = 'rotation-old-secret-0123456789';
    expect(
      (
        await call(api.url, 'POST', '/v1/endpoints', {
          token: admin,
          body: { name: 'rot', url: `${rx.url}/rot`, topics: ['rot.x'], secret: old },
        })
      ).status,
    ).toBe(201);
    expect((await call(api.url, 'POST', '/v1/endpoints/rot/rotate-secret', { token: viewer, body: {} })).status).toBe(403);
    const r = await call(api.url, 'POST', '/v1/endpoints/rot/rotate-secret', { token: admin, body: { overlap: '1h' } });
    expect(r.status).toBe(200);
    const fresh = r.body.secret_next as string;
    expect(fresh).not.toBe(old);
    expect(Date.parse(r.body.rotate_until as string) - Date.now()).toBeGreaterThan(3_500_000);
    await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'rot.x', data: {} } });
    const [got] = await waitFor(() => {
      const hits = rx.requests.filter((q) => q.url === '/rot');
      return hits.length > 0 ? hits : null;
    });
    // A receiver on the old secret alone keeps verifying (X-ACW-Signature); the new one is in X-ACW-Signature-Next.
    expect(verifyWebhook({ secret: old, headers: got!.headers, body: got!.body })).toBe(true);
    expect(verifyWebhook({ secret: fresh, headers: got!.headers, body: got!.body })).toBe(true);
    expect(got!.headers['x-acw-signature-next']).toBeDefined();
    const again = await call(api.url, 'POST', '/v1/endpoints/rot/rotate-secret', { token: admin, body: {} });
    expect(again.status).toBe(409);
    const audit = await db.pool.query(`select details from audit_log where target_id = 'rot'`);
    expect(JSON.stringify(audit.rows)).not.toContain(fresh);
    expect(JSON.stringify(audit.rows)).not.toContain(old);
  });

  it('rotate-secret, after the overlap ends in a running process: the new secret signs alone, the old fails, a second rotation is accepted', async () => {
    const old = 'expiry-old-secret-0123456789';
    const c = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'expiry', url: `${rx.url}/expiry`, topics: ['expiry.x'], secret: old },
    });
    expect(c.status).toBe(201);
    const r = await call(api.url, 'POST', '/v1/endpoints/expiry/rotate-secret', { token: admin, body: { overlap: '1m' } });
    expect(r.status).toBe(200);
    const fresh = r.body.secret_next as string;
    // The API's shortest overlap is a minute: the database's clock shortens this one to a second and a half.
    const until = (
      await db.pool.query<{ t: Date }>(
        `update endpoints set rotate_until = now() + interval '1500 milliseconds', updated_at = clock_timestamp()
         where name = 'expiry' returning rotate_until as t`,
      )
    ).rows[0]!.t.getTime();
    const during = await waitFor(() => {
      const e = api.svc.registry.byName.get('expiry');
      return e?.rotate_until === until ? e : null;
    });
    const deliver = async (n: number) => {
      await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'expiry.x', data: { n } } });
      return waitFor(() => rx.requests.find((q) => q.url === '/expiry' && JSON.parse(q.body.toString()).data.n === n));
    };
    // This process holds both secrets until then (deliveries in the overlap: the test above).
    expect([during.secret, during.secret_next]).toEqual([old, fresh]);
    // The overlap ends in this running process, with no re-read of the endpoint: the same object judges it.
    await waitFor(() => Date.now() > until, 10_000, 50);
    const after = await deliver(2);
    expect(api.svc.registry.byName.get('expiry')).toBe(during);
    expect(after.headers['x-acw-signature-next']).toBeUndefined();
    expect(verifyWebhook({ secret: fresh, headers: after.headers, body: after.body })).toBe(true);
    expect(verifyWebhook({ secret: old, headers: after.headers, body: after.body })).toBe(false);
    const view = await call(api.url, 'GET', '/v1/endpoints/expiry', { token: admin });
    expect(view.body.rotate_until).toBeNull();

    // A second rotation is accepted now: the secret in force (the first rotation's) stays on, beside the next.
    const second = await call(api.url, 'POST', '/v1/endpoints/expiry/rotate-secret', { token: admin, body: { overlap: '1h' } });
    expect(second.status).toBe(200);
    const newest = second.body.secret_next as string;
    expect(newest).not.toBe(fresh);
    const next = await deliver(3);
    expect(next.headers['x-acw-signature-next']).toBeDefined();
    expect([old, fresh, newest].map((k) => [signedBy(k, next, 'x-acw-signature'), signedBy(k, next, 'x-acw-signature-next')])).toEqual([
      [false, false],
      [true, false],
      [false, true],
    ]);
  });
});
