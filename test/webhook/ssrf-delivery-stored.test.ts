// The SSRF guard on endpoints created through the API, at delivery (docs/operations.md#ssrf-guard):
// nothing allowed (`allow_networks: []`), and a resolver the test controls. A host name that
// resolved to a public address when the endpoint was written, and later resolves (DNS rebinding) to
// loopback, a private address or an IPv4-mapped loopback, is refused at connect: the job goes dead
// at once with blocked_address and the receiver on 127.0.0.1 gets nothing. A PATCH to a blocked URL
// is a 400 naming `url`, and changes nothing.
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import type { HostLookup } from '../../src/net/ssrf.js';
import { notifyNow } from '../../src/notify/notify.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/** What each name resolves to now: the test rebinds them. */
const dns = new Map<string, string[]>();
const lookup: HostLookup = async (hostname) => {
  const addresses = dns.get(hostname);
  if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: isIP(address) }));
};
const PUBLIC = '93.184.216.34';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let port: string;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  port = new URL(rx.url).port;
  api = await startApi(db, { notify: { webhook: { allow_networks: [] } } }, 'serve', {
    secretCodec: codecOf(new SecretBox(randomBytes(32))),
    hostLookup: lookup,
  });
  admin = await makeUser(db.pool, 'ssrf-admin', 'admin');
});
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

const create = async (name: string, host: string, topics: string[]) => {
  const r = await call(api.url, 'POST', '/v1/endpoints', { token: admin, body: { name, url: `http://${host}:${port}/${name}`, topics } });
  expect({ name, status: r.status, error: r.body?.error }).toEqual({ name, status: 201, error: undefined });
};

describe('the SSRF guard on stored endpoints, at delivery', () => {
  it('a name rebound to 127.0.0.1, 10.0.0.1, ::1 or ::ffff:127.0.0.1 after the write: dead at once, blocked_address, nothing sent', async () => {
    const cases = [
      ['lo4', '127.0.0.1', 'loopback 127.0.0.0/8'],
      ['private', '10.0.0.1', 'private (RFC 1918) 10.0.0.0/8'],
      ['lo6', '::1', 'loopback ::1/128'],
      ['mapped', '::ffff:127.0.0.1', 'IPv4-mapped loopback ::ffff:127.0.0.0/104'],
    ] as const;
    // Public when written: the write-time check lets them through.
    for (const [name] of cases) {
      dns.set(`${name}.rebind.test`, [PUBLIC]);
      await create(name, `${name}.rebind.test`, ['rebind.x']);
    }
    for (const [name, address] of cases) dns.set(`${name}.rebind.test`, [address]);
    const sent = await notifyNow(api.svc.db.pool, { topic: 'rebind.x', data: {} }, 'tester', api.svc.fanOutContext);
    expect(sent.body.job_ids).toHaveLength(cases.length);

    const jobs = await waitFor(async () => {
      const r = await db.pool.query<{ endpoint: string; status: string; attempts: number }>(
        `select endpoint, status, attempts from jobs where id = any($1::uuid[]) order by endpoint`,
        [sent.body.job_ids],
      );
      return r.rows.every((j) => j.status !== 'pending' && j.status !== 'running') ? r.rows : null;
    }, 20_000);
    // Dead after one attempt: retrying would meet the same answer.
    expect(jobs).toEqual(
      cases.map(([name]) => ({ endpoint: name, status: 'dead', attempts: 1 })).toSorted((a, b) => (a.endpoint < b.endpoint ? -1 : 1)),
    );
    const attempts = await db.pool.query<{ endpoint: string; error_kind: string; error: string; status_code: number | null }>(
      `select endpoint, error_kind, error, status_code from webhook_attempts where job_id = any($1::uuid[])`,
      [sent.body.job_ids],
    );
    expect(attempts.rows).toHaveLength(cases.length);
    for (const [name, address, range] of cases) {
      const a = attempts.rows.find((r) => r.endpoint === name);
      expect({ name, kind: a?.error_kind, code: a?.status_code }).toEqual({ name, kind: 'blocked_address', code: null });
      expect(a?.error).toContain(`${name}.rebind.test resolves to ${address}, which is in ${range}`);
    }
    expect(rx.requests).toHaveLength(0);
  });

  it('a PATCH to a blocked URL is a 400 naming url, and changes nothing', async () => {
    dns.set('patch.rebind.test', [PUBLIC]);
    await create('patched', 'patch.rebind.test', ['patch.x']);
    dns.set('private.patch.test', ['10.0.0.1']);
    dns.set('mapped.patch.test', ['::ffff:127.0.0.1']);
    const before = await rowCounts(db.pool);
    const row = async () => (await db.pool.query(`select url, updated_at from endpoints where name = 'patched'`)).rows[0];
    const was = await row();
    const cases = [
      ['http://10.0.0.1/hook', /^url: 10\.0\.0\.1 is in private \(RFC 1918\) 10\.0\.0\.0\/8/, 'private (RFC 1918)'],
      ['http://[::1]:8080/hook', /^url: ::1 is in loopback ::1\/128/, 'loopback'],
      ['http://[::ffff:127.0.0.1]/hook', /^url: ::ffff:7f00:1 is in IPv4-mapped loopback/, 'IPv4-mapped loopback'],
      ['http://localhost:8080/hook', /^url: localhost resolves to 127\.0\.0\.1, which is in loopback/, 'loopback'],
      [
        `http://private.patch.test:${port}/hook`,
        /^url: private\.patch\.test resolves to 10\.0\.0\.1, which is in private/,
        'private (RFC 1918)',
      ],
      [
        `http://mapped.patch.test:${port}/hook`,
        /^url: mapped\.patch\.test resolves to ::ffff:127\.0\.0\.1, which is in IPv4-mapped loopback/,
        'IPv4-mapped loopback',
      ],
    ] as const;
    for (const [url, message, range] of cases) {
      const r = await call(api.url, 'PATCH', '/v1/endpoints/patched', { token: admin, body: { url } });
      expect({ url, status: r.status, code: r.body.error?.code }).toEqual({ url, status: 400, code: 'invalid_input' });
      expect(r.body.error.message).toMatch(message);
      expect(r.body.error.details).toMatchObject({ field: 'url', reason: 'blocked_address', range });
    }
    expect(await row()).toEqual(was);
    expect(await rowCounts(db.pool)).toEqual(before);
    // A public one is still accepted: the refusals above were the guard's.
    const ok = await call(api.url, 'PATCH', '/v1/endpoints/patched', {
      token: admin,
      body: { url: `http://patch.rebind.test:${port}/moved` },
    });
    expect(ok.status).toBe(200);
  });
});

describe('the control: the same rebound name, with 127.0.0.0/8 allowed', () => {
  it('is delivered, through the injected resolver, to the receiver the guard refused above', async () => {
    const own = await createTestDatabase();
    const open = await startApi(own, { notify: { webhook: { allow_networks: ['127.0.0.0/8'] } } }, 'serve', {
      secretCodec: codecOf(new SecretBox(randomBytes(32))),
      hostLookup: lookup,
    });
    try {
      const token = await makeUser(own.pool, 'ctl-admin', 'admin');
      dns.set('ok.rebind.test', [PUBLIC]);
      const c = await call(open.url, 'POST', '/v1/endpoints', {
        token,
        body: { name: 'control', url: `http://ok.rebind.test:${port}/control`, topics: ['control.x'] },
      });
      expect(c.status).toBe(201);
      dns.set('ok.rebind.test', ['127.0.0.1']);
      await notifyNow(open.svc.db.pool, { topic: 'control.x', data: {} }, 'tester', open.svc.fanOutContext);
      const [got] = await rx.waitForRequests(1, 20_000);
      expect([got!.url, got!.headers.host]).toEqual(['/control', `ok.rebind.test:${port}`]);
    } finally {
      await open.close();
      await own.drop();
    }
  });
});
