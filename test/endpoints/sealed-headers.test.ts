// Stored endpoints' header values sealed at rest (docs/operations.md#secrets-at-rest): written
// sealed, bound to the endpoint and the header's name, never in an answer, an audit row or a log
// line; rows from before migrations/0009 sealed by the first process with the key, under a lock,
// and delivered as they are until then.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { headerContext, sealHeaders, secretContext } from '../../src/endpoints/codec.js';
import { SEAL_LOCK_CLASS, sealPlainHeaders } from '../../src/endpoints/seal-headers.js';
import { codecOf, readStoredEndpoints, toEndpoint } from '../../src/endpoints/store.js';
import { createHttpServer, listenHttp } from '../../src/http/server.js';
import { notifyNow } from '../../src/notify/notify.js';
import type { Service } from '../../src/service.js';
import { call, makeUser } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

const codec = codecOf(new SecretBox(randomBytes(32)))!;
const TOKEN = `receiver-token-${randomBytes(12).toString('hex')}`;
const BEARER = `bearer-${randomBytes(12).toString('hex')}`;
const WEBHOOK = { notify: { webhook: { allow_networks: ['127.0.0.0/8'] } } };

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
});

/** A serve process (service and HTTP API) whose log lines are kept as text. */
async function serve(db: TestDatabase) {
  const s = await startTestService(db, WEBHOOK, { secretCodec: codec });
  const app = await createHttpServer(s.svc, { mode: 'serve' });
  const url = (await listenHttp(app, '127.0.0.1:0')).url;
  return {
    ...s,
    url,
    close: async () => {
      await app.close();
      await s.svc.stop();
    },
  };
}

/**
 * An endpoint row written directly: as a process before migrations/0009 wrote it (the secret sealed,
 * the header values plain), or as the store writes it now (`sealed`).
 */
async function insertRow(db: TestDatabase, name: string, headers: Record<string, string>, o: { deleted?: boolean; sealed?: boolean } = {}) {
  await db.pool.query(
    `insert into endpoints (name, url, topics, headers, secret, owner, deleted_at${o.sealed ? ', headers_sealed' : ''})
     values ($1, $2, $3, $4::jsonb, $5, 'ops', $6${o.sealed ? ', true' : ''})`,
    [
      name,
      `${rx.url}/${name}`,
      [`${name}.x`],
      JSON.stringify(o.sealed ? sealHeaders(codec, name, headers) : headers),
      o.deleted ? '' : codec.seal(`${name}-secret-0123456789`, secretContext(name, 'secret')),
      o.deleted ? new Date() : null,
    ],
  );
}

const stored = async (db: TestDatabase, name: string) =>
  (
    await db.pool.query<{ headers: Record<string, string>; headers_sealed: boolean; text: string }>(
      `select headers, headers_sealed, headers::text as text from endpoints where name = $1`,
      [name],
    )
  ).rows[0]!;

describe('rows written before header values were sealed', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrated: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('are sealed at the first start, still delivered with their headers, and the plain values are gone from the table', async () => {
    await migrate(db.pool, { schema: 'public', migrations: loadMigrations().filter((m) => m.id < 9) });
    await insertRow(db, 'legacy', { 'X-Receiver-Token': TOKEN, Authorization: `Bearer ${BEARER}` });
    await insertRow(db, 'gone', { 'X-Receiver-Token': TOKEN }, { deleted: true });
    await migrate(db.pool, { schema: 'public' });
    // The migration marks the old row plain (SQL cannot seal), and empties the tombstone's.
    expect(await stored(db, 'legacy')).toMatchObject({ headers_sealed: false, headers: { 'X-Receiver-Token': TOKEN } });
    expect(await stored(db, 'gone')).toEqual({ headers_sealed: true, headers: {}, text: '{}' });

    const api = await serve(db);
    try {
      expect(api.events('endpoints.headers_sealed')).toMatchObject([{ endpoints: ['legacy'] }]);
      const row = await stored(db, 'legacy');
      expect(row.headers_sealed).toBe(true);
      expect(Object.keys(row.headers)).toEqual(['Authorization', 'X-Receiver-Token']);
      for (const v of Object.values(row.headers)) expect(v).toMatch(/^v1:[0-9a-f]{8}:/);
      const all = (await db.pool.query<{ t: string }>(`select string_agg(e::text, ' ') as t from endpoints e`)).rows[0]!.t;
      expect(all).not.toContain(TOKEN);
      expect(all).not.toContain(BEARER);

      await notifyNow(api.svc.db.pool, { topic: 'legacy.x', data: {} }, 'test', api.svc.fanOutContext);
      const [got] = await waitFor(() => {
        const hits = rx.requests.filter((r) => r.url === '/legacy');
        return hits.length > 0 ? hits : null;
      });
      expect([got!.headers['x-receiver-token'], got!.headers.authorization]).toEqual([TOKEN, `Bearer ${BEARER}`]);

      // Every answer that shows the endpoint, its audit rows and the log: no value.
      const admin = await makeUser(db.pool, 'ops', 'admin');
      const answers = [
        await call(api.url, 'GET', '/v1/endpoints', { token: admin }),
        await call(api.url, 'GET', '/v1/endpoints/legacy', { token: admin }),
        await call(api.url, 'PATCH', '/v1/endpoints/legacy', { token: admin, body: { description: 'sealed now' } }),
      ];
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      const audit = (await db.pool.query(`select * from audit_log`)).rows;
      expect(audit.length).toBeGreaterThan(0);
      for (const text of [...answers.map((a) => a.text), JSON.stringify(audit), api.raw()]) {
        expect(text).not.toContain(TOKEN);
        expect(text).not.toContain(BEARER);
      }
    } finally {
      await api.close();
    }
  });
});

describe('header values written through the API', () => {
  let db: TestDatabase;
  let api: Awaited<ReturnType<typeof serve>>;
  let admin: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await serve(db);
    admin = await makeUser(db.pool, 'ops', 'admin');
  });
  afterAll(async () => {
    await api.close();
    await db.drop();
  });

  it('are sealed by a create and a PATCH, delivered in plain, shown nowhere (names only in the audit)', async () => {
    const c = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'hdr', url: `${rx.url}/hdr`, topics: ['hdr.x'], headers: { 'X-Receiver-Token': TOKEN } },
    });
    expect(c.status).toBe(201);
    const created = await stored(db, 'hdr');
    expect(created.headers_sealed).toBe(true);
    expect(created.text).not.toContain(TOKEN);
    expect(codec.open(created.headers['X-Receiver-Token']!, headerContext('hdr', 'X-Receiver-Token'))).toBe(TOKEN);

    const p = await call(api.url, 'PATCH', '/v1/endpoints/hdr', { token: admin, body: { headers: { 'X-Other': BEARER } } });
    expect(p.status).toBe(200);
    const patched = await stored(db, 'hdr');
    expect(Object.keys(patched.headers)).toEqual(['X-Other']);
    expect(patched.text).not.toContain(BEARER);

    await call(api.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'hdr.x', data: {} } });
    const [got] = await waitFor(() => {
      const hits = rx.requests.filter((r) => r.url === '/hdr');
      return hits.length > 0 ? hits : null;
    });
    expect([got!.headers['x-other'], got!.headers['x-receiver-token']]).toEqual([BEARER, undefined]);

    const audit = (
      await db.pool.query<{ action: string; details: unknown }>(`select action, details from audit_log where target_id = 'hdr' order by id`)
    ).rows;
    expect(audit.map((a) => a.action)).toEqual(['endpoint.created', 'endpoint.updated']);
    expect(audit[0]!.details).toMatchObject({ headers: ['X-Receiver-Token'] });
    expect(audit[1]!.details).toMatchObject({ changed: { headers: { from: ['X-Receiver-Token'], to: ['X-Other'] } } });
    for (const text of [c.text, p.text, JSON.stringify(audit), api.raw()]) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(BEARER);
    }
  });

  it('a deleted endpoint keeps no header value in its tombstone', async () => {
    await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'bye', url: `${rx.url}/bye`, topics: ['bye.x'], headers: { 'X-Receiver-Token': TOKEN } },
    });
    expect((await call(api.url, 'DELETE', '/v1/endpoints/bye', { token: admin })).status).toBe(200);
    expect((await stored(db, 'bye')).headers).toEqual({});
  });

  it('a sealed value moved to another header or another endpoint does not open: that endpoint is held, never sent', async () => {
    const config = parseConfig(WEBHOOK);
    await insertRow(db, 'left', { 'X-A': 'a-value', 'X-B': 'b-value' }, { sealed: true });
    await insertRow(db, 'right', { 'X-A': 'other-a' }, { sealed: true });
    const open = async (name: string) => {
      const row = (await readStoredEndpoints(db.pool)).find((r) => r.name === name)!;
      return () => toEndpoint(row, config, codec).headers;
    };
    expect((await open('left'))()).toEqual({ 'X-A': 'a-value', 'X-B': 'b-value' });
    // Swapped within the row, then copied from another endpoint's row.
    await db.pool.query(
      `update endpoints set headers = jsonb_build_object('X-A', headers->'X-B', 'X-B', headers->'X-A') where name = 'left'`,
    );
    expect(await open('left')).toThrow(/failed authentication/);
    expect((await open('right'))()).toEqual({ 'X-A': 'other-a' });
    await db.pool.query(
      `update endpoints set headers = jsonb_build_object('X-A', (select headers->'X-A' from endpoints where name = 'left')) where name = 'right'`,
    );
    expect(await open('right')).toThrow(/failed authentication/);
    // A running process holds it (jobs wait) and says so, naming no value.
    await db.pool.query(`update endpoints set updated_at = clock_timestamp() where name = 'right'`);
    await waitFor(() => api.svc.registry.byName.get('right')?.enabled === false);
    expect(api.events('endpoint.secret_unreadable').map((l) => l['endpoint'])).toContain('right');
  });
});

describe('sealing plain rows', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('is done by one process at a time, under a lock; a process that finds it taken delivers the plain values meanwhile', async () => {
    await insertRow(db, 'waiting', { 'X-Receiver-Token': TOKEN });
    const holder = await db.pool.connect();
    let svc: Service | undefined;
    try {
      await holder.query('begin');
      await holder.query(`select pg_advisory_xact_lock($1, hashtext(current_schema()))`, [SEAL_LOCK_CLASS]);
      expect(await sealPlainHeaders(db.pool, codec)).toEqual({ ran: false, sealed: [] });
      // A service starting now cannot seal: it reads the row as it is, and delivers with it.
      const s = await startTestService(db, WEBHOOK, { secretCodec: codec });
      svc = s.svc;
      expect(s.events('endpoints.headers_sealed')).toEqual([]);
      expect((await stored(db, 'waiting')).headers_sealed).toBe(false);
      await notifyNow(svc.db.pool, { topic: 'waiting.x', data: {} }, 'test', svc.fanOutContext);
      const [got] = await waitFor(() => {
        const hits = rx.requests.filter((r) => r.url === '/waiting');
        return hits.length > 0 ? hits : null;
      });
      expect(got!.headers['x-receiver-token']).toBe(TOKEN);
      await holder.query('commit');
      // The lock free, two at once: one seals, the other finds nothing left; each value sealed once.
      const both = await Promise.all([sealPlainHeaders(db.pool, codec), sealPlainHeaders(db.pool, codec)]);
      expect(both.flatMap((r) => r.sealed)).toEqual(['waiting']);
      const row = await stored(db, 'waiting');
      expect(codec.open(row.headers['X-Receiver-Token']!, headerContext('waiting', 'x-receiver-token'))).toBe(TOKEN);
      expect(await sealPlainHeaders(db.pool, codec)).toEqual({ ran: true, sealed: [] });
    } finally {
      holder.release();
      await svc?.stop();
    }
  });
});
