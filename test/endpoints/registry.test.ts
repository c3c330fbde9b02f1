// The registry of endpoints a process delivers to (src/endpoints/registry.ts) and a stored row as
// the service uses it (src/endpoints/rows.ts), against PostgreSQL without a service: what a start
// reads, what a NOTIFY or the poll brings, what is held when a secret does not open, and the
// defaults a row takes from this process's config.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, type Endpoint } from '../../src/config/index.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { ListenHub, type ListenSubscriber } from '../../src/db/listen-hub.js';
import { codecOf, headerContext, secretContext, type SecretCodec } from '../../src/endpoints/codec.js';
import { EndpointNameClash, EndpointRegistry } from '../../src/endpoints/registry.js';
import { purgeTombstones, readStoredEndpoints, storedVersion, toEndpoint, type StoredRow } from '../../src/endpoints/rows.js';
import { SEAL_LOCK_CLASS, sealPlainHeaders } from '../../src/endpoints/seal-headers.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const codec = codecOf(new SecretBox(randomBytes(32)))!;
const CHANNEL = 'test_registry_defs';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const registries: EndpointRegistry[] = [];
const hubs: ListenHub[] = [];
const pools: pg.Pool[] = [];
afterEach(async () => {
  for (const r of registries.splice(0)) await r.stop();
  for (const h of hubs.splice(0)) await h.close();
  for (const p of pools.splice(0)) if (!p.ended) await p.end();
  await db.pool.query(`delete from endpoints`);
});

/** A stored row, sealed as the store seals it (or as given). */
async function insert(
  name: string,
  over: { secret?: string; headers?: Record<string, string>; sealed?: boolean; timeout_ms?: number; updated?: string } = {},
): Promise<void> {
  const sealed = over.sealed ?? true;
  const headers = over.headers ?? {};
  await db.pool.query(
    `insert into endpoints (name, url, topics, scheme, headers, headers_sealed, timeout_ms, secret, owner, updated_at)
     values ($1, $2, '{a.b}', 'acw', $3::jsonb, $4, $5, $6, 'ops', coalesce($7::timestamptz, clock_timestamp()))`,
    [
      name,
      `https://${name}.example.com/h`,
      JSON.stringify(
        sealed ? Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, codec.seal(v, headerContext(name, k))])) : headers,
      ),
      sealed,
      over.timeout_ms ?? null,
      over.secret ?? codec.seal(`${name}-secret`, secretContext(name, 'secret')),
      over.updated ?? null,
    ],
  );
}

async function registry(
  over: {
    codec?: SecretCodec | null;
    config?: Record<string, unknown>;
    pollMs?: number;
    url?: string;
    pool?: pg.Pool;
    silent?: boolean;
    listenHub?: ListenHub;
  } = {},
) {
  const logs = captureLogs();
  const changes: Array<readonly Endpoint[]> = [];
  const pool = over.pool ?? (over.url === undefined ? db.pool : new pg.Pool({ connectionString: over.url, max: 1 }));
  if (over.url !== undefined && over.pool === undefined) pools.push(pool);
  // The process's LISTEN connection, as the service makes it: one per registry here.
  const hub = new ListenHub({ url: over.url ?? db.url });
  hubs.push(hub);
  const r = new EndpointRegistry({
    pool,
    listenHub: over.listenHub ?? hub,
    channel: CHANNEL,
    config: parseConfig(over.config ?? {}),
    codec: over.codec === undefined ? codec : over.codec,
    log: logs.log,
    // Long: a test that wants a re-read asks for it (refresh, or a NOTIFY), unless it tests the poll.
    pollMs: over.pollMs ?? 600_000,
    ...(over.silent ? {} : { onChange: (list: readonly Endpoint[]) => changes.push(list) }),
  });
  registries.push(r);
  return { r, logs, changes, pool, hub };
}

/**
 * The test database's pool, with `after` called once each query has its answer (before the caller
 * sees it): to count the registry's reads, hold one, or fail one.
 */
function watched(after: (text: string) => Promise<void> | void): pg.Pool {
  return new Proxy(db.pool, {
    get(target, key) {
      if (key === 'query') {
        return async (text: string, values?: unknown[]) => {
          const res = await target.query(text, values);
          await after(text);
          return res;
        };
      }
      const v: unknown = Reflect.get(target, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

const isRowRead = (text: string) => text.includes('from endpoints where deleted_at is null');

/** A promise to wait on, and what settles it. */
function signal(): { fired: Promise<void>; fire: () => void } {
  const s = { fired: Promise.resolve(), fire: (): void => undefined };
  s.fired = new Promise<void>((resolve) => (s.fire = resolve));
  return s;
}

/**
 * A stand-in for the process's LISTEN connection that hands the test the registry's subscriber, to
 * call when a NOTIFY or a reconnect would: the registry uses only subscribe(), and the class's
 * private fields make the cast necessary.
 */
function handHub(): { hub: ListenHub; sub: () => ListenSubscriber } {
  let got: ListenSubscriber | undefined;
  const hub = {
    subscribe: async (_channel: string, sub: ListenSubscriber) => {
      got = sub;
      return { close: async () => undefined };
    },
  };
  return { hub: hub as unknown as ListenHub, sub: () => got! };
}

const CONFIG_EP = {
  notify: { webhook: { endpoints: [{ name: 'from-config', url: 'https://c.example.com/h', secret: 's', topics: ['*'] }] } },
};

describe('EndpointRegistry', () => {
  it('starts with the config endpoints, then the stored ones by name, opened', async () => {
    await insert('zulu');
    await insert('alpha', { headers: { 'X-Token': 'tok' } });
    const { r, changes } = await registry({ config: CONFIG_EP });
    expect(r.endpoints.map((e) => e.name)).toEqual(['from-config']);
    await r.start();
    expect(r.endpoints.map((e) => [e.name, e.source === 'api'])).toEqual([
      ['from-config', false],
      ['alpha', true],
      ['zulu', true],
    ]);
    expect(r.byName.get('alpha')).toMatchObject({ secret: 'alpha-secret', headers: { 'X-Token': 'tok' }, enabled: true });
    expect([...r.configNames]).toEqual(['from-config']);
    expect(changes).toHaveLength(1);
  });

  it.each([
    [['from-config'], 'from-config is also created'],
    [['from-config', 'other-config'], 'from-config, other-config are also created'],
  ])('refuses to start when stored endpoints are named like config ones (%j)', async (names, words) => {
    for (const n of names) await insert(n);
    const endpoints = names.map((name) => ({ name, url: 'https://c.example.com/h', secret: 's', topics: ['*'] }));
    const { r } = await registry({ config: { notify: { webhook: { endpoints } } } });
    const err = await r.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EndpointNameClash);
    expect((err as Error).name).toBe('EndpointNameClash');
    expect((err as Error).message).toBe(
      `notify.webhook.endpoints: ${words} through the endpoints API (stored in the database): rename the config entry, ` +
        'or delete the stored endpoint (acw-webhooks endpoints remove NAME)',
    );
  });

  it('starts on a database it cannot read yet with the config endpoints, and says so', async () => {
    const { r, logs } = await registry({ config: CONFIG_EP, url: db.url.replace(/\/[^/]+$/, '/acw_no_such_database') });
    await r.start();
    expect(r.endpoints.map((e) => e.name)).toEqual(['from-config']);
    expect(logs.events('endpoints.read_error')).toEqual([
      expect.objectContaining({ level: 40, msg: 'stored endpoints cannot be read yet; retrying' }),
    ]);
  });

  it('re-reads on refresh only when the table moved, or when forced; keeps the object of an endpoint that did not change', async () => {
    await insert('steady');
    const { r, changes } = await registry();
    await r.start();
    const steady = r.byName.get('steady');
    await r.refresh(false);
    await r.refresh(true);
    expect(changes).toHaveLength(1);
    await insert('newcomer');
    await r.refresh(false);
    expect(changes).toHaveLength(2);
    expect(r.endpoints.map((e) => e.name)).toEqual(['newcomer', 'steady']);
    expect(r.byName.get('steady')).toBe(steady);
    await db.pool.query(`update endpoints set url = 'https://moved.example.com/h', updated_at = clock_timestamp() where name = 'steady'`);
    await r.refresh(false);
    expect(r.byName.get('steady')).not.toBe(steady);
    expect(r.byName.get('steady')?.url).toBe('https://moved.example.com/h');
    // A tombstone leaves the list.
    await db.pool.query(`update endpoints set deleted_at = now(), updated_at = clock_timestamp() where name = 'newcomer'`);
    await r.refresh(false);
    expect(r.endpoints.map((e) => e.name)).toEqual(['steady']);
    expect(changes).toHaveLength(4);
    expect(changes.at(-1)).toBe(r.endpoints);
  });

  it('follows the NOTIFY of the endpoints API, and the poll when one is lost', async () => {
    const { r } = await registry();
    await r.start();
    await insert('announced');
    await db.pool.query(`select pg_notify($1, 'announced')`, [CHANNEL]);
    await waitFor(() => r.byName.has('announced'));
    expect(r.byName.get('announced')?.secret).toBe('announced-secret');
    const polled = await registry({ pollMs: 20 });
    await polled.r.start();
    await insert('unannounced');
    await waitFor(() => polled.r.byName.has('unannounced'));
    expect(r.byName.has('unannounced')).toBe(false);
  });

  it.each(['a NOTIFY', 'a reconnect'] as const)(
    '%s during a read reads again after it: the read under way may have begun before the change',
    async (what) => {
      let holding = false;
      const atGate = signal();
      const opened = signal();
      const hand = handHub();
      const { r } = await registry({
        listenHub: hand.hub,
        pool: watched(async (text) => {
          if (!holding || !isRowRead(text)) return;
          holding = false;
          atGate.fire();
          await opened.fired;
        }),
      });
      await r.start();
      holding = true;
      // This read has its rows (without 'late') and is held before it applies them.
      const first = r.refresh(true);
      await atGate.fired;
      await insert('late');
      if (what === 'a NOTIFY') hand.sub().onNotify('late');
      else hand.sub().onReconnect();
      opened.fire();
      await first;
      // No poll for ten minutes: only the read that the NOTIFY (or reconnect) asked for finds it.
      await waitFor(() => r.byName.has('late'));
      expect(r.endpoints.map((e) => e.name)).toEqual(['late']);
    },
  );

  it('polls the fingerprint, and reads the rows only when it moved', async () => {
    let versions = 0;
    let reads = 0;
    await insert('steady');
    const { r } = await registry({
      pollMs: 10,
      pool: watched((text) => {
        if (text.includes('count(*)')) versions++;
        if (isRowRead(text)) reads++;
      }),
    });
    await r.start();
    expect(reads).toBe(1);
    const seen = versions;
    await waitFor(() => versions >= seen + 3);
    expect(reads).toBe(1);
    await insert('moved');
    await waitFor(() => r.byName.has('moved'));
    expect(reads).toBe(2);
  });

  it('knows its config endpoints by name before it starts', async () => {
    const { r } = await registry({ config: CONFIG_EP });
    expect(r.byName.get('from-config')?.url).toBe('https://c.example.com/h');
  });

  it('reads the rows on a poll only when the fingerprint moved; a forced refresh always does', async () => {
    let reads = 0;
    await insert('counted');
    const { r } = await registry({
      pool: watched((text) => {
        if (isRowRead(text)) reads++;
      }),
    });
    await r.start();
    expect(reads).toBe(1);
    await r.refresh(false);
    expect(reads).toBe(1);
    await r.refresh(true);
    expect(reads).toBe(2);
    await insert('moved-on');
    await r.refresh(false);
    expect(reads).toBe(3);
  });

  it('seals a plain row met after the start, when no row is sealed yet', async () => {
    const { r } = await registry();
    await r.start();
    await insert('first-plain', { headers: { 'X-Token': 'plain-tok' }, sealed: false });
    await r.refresh(false);
    expect(r.byName.get('first-plain')?.headers).toEqual({ 'X-Token': 'plain-tok' });
    expect((await readStoredEndpoints(db.pool))[0]?.headers_sealed).toBe(true);
  });

  it('re-reads at once when its LISTEN connection comes back (NOTIFYs sent meanwhile are gone)', async () => {
    const { r, hub } = await registry();
    await r.start();
    await insert('while-away');
    const pid = (await hub.listening())?.pid;
    const killed = await db.pool.query<{ ok: boolean }>(`select pg_terminate_backend($1) as ok`, [pid]);
    expect(killed.rows[0]?.ok).toBe(true);
    await waitFor(() => r.byName.has('while-away'));
    expect(r.byName.get('while-away')?.secret).toBe('while-away-secret');
  });

  it('keeps polling, and stops polling and listening when stopped', async () => {
    let versions = 0;
    const { r, hub } = await registry({
      pollMs: 20,
      pool: watched((text) => {
        if (text.includes('count(*)')) versions++;
      }),
    });
    await r.start();
    await insert('one');
    await waitFor(() => r.byName.has('one'));
    await insert('two');
    await waitFor(() => r.byName.has('two'));
    expect((await hub.listening())?.channels).toEqual([CHANNEL]);
    await r.stop();
    // The hub is the process's: it stays up, without this channel.
    expect((await hub.listening())?.channels).toEqual([]);
    const after = versions;
    await insert('three');
    // Absence can only be sampled: ten poll intervals with no look at the table.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(versions).toBe(after);
    expect(r.byName.has('three')).toBe(false);
  });

  it('ignores a stored row named like a config endpoint that appears after the start: the config one stays', async () => {
    const { r } = await registry({ config: CONFIG_EP });
    await r.start();
    const configured = r.byName.get('from-config');
    await insert('from-config');
    await insert('other');
    await r.refresh(true);
    expect(r.endpoints.map((e) => e.name)).toEqual(['from-config', 'other']);
    expect(r.byName.get('from-config')).toBe(configured);
  });

  it('needs no onChange callback', async () => {
    const { r } = await registry({ silent: true });
    await insert('quiet');
    await r.start();
    await insert('quieter');
    await r.refresh(true);
    expect(r.endpoints.map((e) => e.name)).toEqual(['quiet', 'quieter']);
  });

  it('keeps the rows it has when the read after sealing fails: the same endpoints, plain headers', async () => {
    await insert('reread', { headers: { 'X-Token': 'plain-tok' }, sealed: false });
    let rowReads = 0;
    const { r } = await registry({
      pool: watched((text) => {
        if (isRowRead(text) && ++rowReads === 2) throw new Error('connection lost');
      }),
    });
    await r.start();
    expect(rowReads).toBe(2);
    expect(r.byName.get('reread')?.headers).toEqual({ 'X-Token': 'plain-tok' });
    expect((await readStoredEndpoints(db.pool))[0]?.headers_sealed).toBe(true);
  });

  it('one read at a time: a refresh asked meanwhile shares it; forced ones share one read after it', async () => {
    let reads = 0;
    const { r } = await registry({
      pool: watched((text) => {
        if (isRowRead(text)) reads++;
      }),
    });
    await r.start();
    expect(reads).toBe(1);
    await insert('second');
    // Unforced, asked while a forced read is under way: it waits for that read, and reads nothing.
    await Promise.all([r.refresh(true), r.refresh(false)]);
    expect(reads).toBe(2);
    expect(r.byName.has('second')).toBe(true);
    // Three forced ones at once: the first reads, the other two share one read after it.
    await Promise.all([r.refresh(true), r.refresh(true), r.refresh(true)]);
    expect(reads).toBe(4);
    await r.stop();
    // After stop, a forced refresh asked during a read does not read again after it.
    await insert('third');
    await Promise.all([r.refresh(true), r.refresh(true)]);
    expect(reads).toBe(5);
  });

  it('holds an endpoint whose secret does not open here: disabled, unsigned never, logged once; and opens it again once fixed', async () => {
    // Sealed for another endpoint: authentic, but not this row's.
    await insert('moved', { secret: codec.seal('x', secretContext('elsewhere', 'secret')), timeout_ms: 2_000 });
    const { r, logs } = await registry();
    await r.start();
    expect(r.byName.get('moved')).toMatchObject({
      name: 'moved',
      url: 'https://moved.example.com/h',
      secret: '',
      enabled: false,
      headers: {},
      rate_limit: 0,
      timeout: 2_000,
      connect_timeout: 2_000,
      max_in_flight: 16,
      source: 'api',
      owner: 'ops',
      ssrf_guard: true,
      allow_networks: [],
    });
    expect(logs.events('endpoint.secret_unreadable')).toEqual([
      expect.objectContaining({
        level: 50,
        endpoint: 'moved',
        msg: 'endpoint moved: its secret or a header value cannot be opened here, so its jobs wait',
      }),
    ]);
    await db.pool.query(`update endpoints set description = 'still moved', updated_at = clock_timestamp() where name = 'moved'`);
    await r.refresh(false);
    expect(r.byName.get('moved')?.description).toBe('still moved');
    expect(logs.events('endpoint.secret_unreadable')).toHaveLength(1);
    await db.pool.query(`update endpoints set secret = $1, updated_at = clock_timestamp() where name = 'moved'`, [
      codec.seal('fixed', secretContext('moved', 'secret')),
    ]);
    await r.refresh(false);
    expect(r.byName.get('moved')).toMatchObject({ secret: 'fixed', enabled: true });
    // Broken again: logged again.
    await db.pool.query(`update endpoints set secret = 'v1:00000000:AAAA', updated_at = clock_timestamp() where name = 'moved'`);
    await r.refresh(false);
    expect(r.byName.get('moved')?.enabled).toBe(false);
    expect(logs.events('endpoint.secret_unreadable')).toHaveLength(2);
  });

  it('without a key holds every stored endpoint, naming the missing key; a default timeout caps the connect timeout at 5 s', async () => {
    await insert('keyless');
    const { r, logs } = await registry({ codec: null });
    await r.start();
    expect(r.byName.get('keyless')).toMatchObject({ enabled: false, secret: '', timeout: 10_000, connect_timeout: 5_000 });
    expect(logs.events('endpoint.secret_unreadable')[0]?.err).toBe('no encryption key is configured here (secrets.encryption_key)');
  });

  it('seals header values left plain by an older process, at start and when it meets one later', async () => {
    await insert('plain', { headers: { 'X-Token': 'plain-tok' }, sealed: false });
    const { r, logs } = await registry();
    await r.start();
    expect(r.byName.get('plain')?.headers).toEqual({ 'X-Token': 'plain-tok' });
    const stored = (await readStoredEndpoints(db.pool))[0]!;
    expect(stored.headers_sealed).toBe(true);
    expect(stored.headers['X-Token']).not.toBe('plain-tok');
    expect(logs.events('endpoints.headers_sealed')).toEqual([
      expect.objectContaining({
        endpoints: ['plain'],
        msg: 'header values of 1 stored endpoint(s) written before they were sealed at rest are sealed now',
      }),
    ]);
    await insert('later', { headers: { 'X-Late': 'late-tok' }, sealed: false });
    await r.refresh(false);
    expect(r.byName.get('later')?.headers).toEqual({ 'X-Late': 'late-tok' });
    expect((await db.pool.query(`select count(*)::int as n from endpoints where not headers_sealed`)).rows[0].n).toBe(0);
    expect(logs.events('endpoints.headers_sealed').map((l) => l.endpoints)).toEqual([['plain'], ['later']]);
  });

  it('seals under a lock: a process that finds it taken leaves the rows to the holder, and they work plain meanwhile', async () => {
    await insert('locked', { headers: { 'X-Token': 'plain-tok' }, sealed: false });
    await insert('done', { headers: { 'X-Token': 'sealed-tok' } });
    const version = await storedVersion(db.pool);
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select pg_advisory_xact_lock($1, hashtext(current_schema()))`, [SEAL_LOCK_CLASS]);
      expect(await sealPlainHeaders(db.pool, codec)).toEqual({ ran: false, sealed: [] });
      const { r, logs } = await registry();
      await r.start();
      expect(r.byName.get('locked')?.headers).toEqual({ 'X-Token': 'plain-tok' });
      expect(logs.events('endpoints.headers_sealed')).toEqual([]);
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect(await sealPlainHeaders(db.pool, codec)).toEqual({ ran: true, sealed: ['locked'] });
    expect(await sealPlainHeaders(db.pool, codec)).toEqual({ ran: true, sealed: [] });
    const rows = await readStoredEndpoints(db.pool);
    expect(rows.map((x) => [x.name, x.headers_sealed])).toEqual([
      ['done', true],
      ['locked', true],
    ]);
    // Sealed once, for its endpoint and header name; the row's version is left alone.
    expect(codec.open(rows[1]!.headers['X-Token']!, headerContext('locked', 'X-Token'))).toBe('plain-tok');
    expect(codec.open(rows[0]!.headers['X-Token']!, headerContext('done', 'X-Token'))).toBe('sealed-tok');
    expect(await storedVersion(db.pool)).toBe(version);
  });

  it('a failed sealing is logged and not tried again for a minute; the plain values keep working meanwhile', async () => {
    await insert('unsealable', { headers: { 'X-Token': 'plain-tok' }, sealed: false });
    const failing: SecretCodec = {
      seal: () => {
        throw new Error('sealing is broken here');
      },
      open: codec.open,
    };
    const { r, logs } = await registry({ codec: failing });
    await r.start();
    expect(r.byName.get('unsealable')).toMatchObject({ headers: { 'X-Token': 'plain-tok' }, enabled: true });
    expect(logs.events('endpoints.seal_error')).toEqual([
      expect.objectContaining({
        level: 40,
        err: 'sealing is broken here',
        msg: 'sealing stored header values failed; they keep working as they are, and it is tried again in a minute',
      }),
    ]);
    await db.pool.query(`update endpoints set description = 'x', updated_at = clock_timestamp() where name = 'unsealable'`);
    await r.refresh(false);
    expect(r.byName.get('unsealable')?.description).toBe('x');
    expect(logs.events('endpoints.seal_error')).toHaveLength(1);
  });

  it('a read that fails after the start is logged and retried; the list stays as it was', async () => {
    await insert('kept');
    const { r, logs, pool } = await registry({ url: db.url });
    await r.start();
    await pool.end();
    await r.refresh(true);
    expect(r.endpoints.map((e) => e.name)).toEqual(['kept']);
    expect(logs.events('endpoints.read_error')).toEqual([
      expect.objectContaining({ level: 40, msg: 'reading stored endpoints failed; retrying' }),
    ]);
  });
});

/** A stored row of endpoint `row`, sealed, with nothing optional set. */
const base = (over: Partial<StoredRow> = {}): StoredRow => ({
  ordering: 'relaxed',
  propagate_trace: null,
  name: 'row',
  url: 'https://row.example.com/h',
  topics: ['a.b'],
  scheme: 'acw',
  headers: {},
  headers_sealed: true,
  timeout_ms: null,
  max_in_flight: null,
  rate_limit: null,
  enabled: true,
  description: 'd',
  secret: codec.seal('row-secret', secretContext('row', 'secret')),
  secret_next: null,
  rotate_until: null,
  owner: 'ops',
  created_at: new Date('2026-01-02T03:04:05.000Z'),
  updated_at: new Date('2026-01-03T03:04:05.000Z'),
  ...over,
});

describe('a stored row as the service uses it', () => {
  it("takes this process's defaults for what the row leaves unset", () => {
    const config = parseConfig({
      notify: { webhook: { timeout: '8s', max_in_flight: 7, rate_limit: '30/s', allow_networks: ['10.0.0.0/8'] } },
    });
    expect(toEndpoint(base(), config, codec)).toEqual({
      name: 'row',
      url: 'https://row.example.com/h',
      secret: 'row-secret',
      topics: ['a.b'],
      timeout: 8_000,
      connect_timeout: 5_000,
      max_in_flight: 7,
      rate_limit: 30,
      scheme: 'acw',
      ordering: 'relaxed',
      headers: {},
      enabled: true,
      source: 'api',
      description: 'd',
      owner: 'ops',
      created_at: '2026-01-02T03:04:05.000Z',
      updated_at: '2026-01-03T03:04:05.000Z',
      ssrf_guard: true,
      allow_networks: ['10.0.0.0/8'],
      propagate_trace: false,
      propagate_trace_set: null,
    });
  });

  it("sends trace context by its own propagate_trace, or by notify.webhook.propagate_trace when the row's is null", () => {
    const on = parseConfig({ notify: { webhook: { propagate_trace: true } } });
    const off = parseConfig({});
    const of = (own: boolean | null, config: typeof on): [boolean | undefined, boolean | null | undefined] => {
      const ep = toEndpoint(base({ propagate_trace: own }), config, codec);
      return [ep.propagate_trace, ep.propagate_trace_set];
    };
    expect([of(null, on), of(null, off), of(false, on), of(true, off)]).toEqual([
      [true, null],
      [false, null],
      [false, false],
      [true, true],
    ]);
  });

  it('uses its own values, bounded by the process: the connect timeout by the timeout, max_in_flight by the total', () => {
    const config = parseConfig({ notify: { webhook: { connect_timeout: '3s', max_in_flight_total: 50 } } });
    const ep = toEndpoint(base({ timeout_ms: 2_000, max_in_flight: 80, rate_limit: '600/min' }), config, codec);
    expect([ep.timeout, ep.connect_timeout, ep.max_in_flight, ep.rate_limit]).toEqual([2_000, 2_000, 50, 10]);
    const wide = toEndpoint(base({ timeout_ms: 9_000, max_in_flight: 20 }), config, codec);
    expect([wide.connect_timeout, wide.max_in_flight]).toEqual([3_000, 20]);
  });

  it('is enabled only when both the row and notify.webhook.enabled say so', () => {
    const off = parseConfig({ notify: { webhook: { enabled: false } } });
    const on = parseConfig({});
    expect(toEndpoint(base(), off, codec).enabled).toBe(false);
    expect(toEndpoint(base({ enabled: false }), on, codec).enabled).toBe(false);
    expect(toEndpoint(base(), on, codec).enabled).toBe(true);
  });

  it('carries the next secret only with the end of its overlap; opens sealed headers, passes plain ones', () => {
    const config = parseConfig({});
    const next = codec.seal('row-next', secretContext('row', 'secret_next'));
    const until = new Date('2026-02-01T00:00:00.000Z');
    expect(toEndpoint(base({ secret_next: next, rotate_until: until }), config, codec)).toMatchObject({
      secret_next: 'row-next',
      rotate_until: until.getTime(),
    });
    // One without the other is no rotation: nothing of it is carried, nor opened.
    for (const half of [
      base({ secret_next: next, rotate_until: null }),
      base({ secret_next: 'v1:00000000:AAAA', rotate_until: null }),
      base({ secret_next: null, rotate_until: until }),
    ]) {
      const ep = toEndpoint(half, config, codec);
      expect('secret_next' in ep || 'rotate_until' in ep).toBe(false);
    }
    const sealed = { 'X-Token': codec.seal('tok', headerContext('row', 'X-Token')) };
    expect(toEndpoint(base({ headers: sealed }), config, codec).headers).toEqual({ 'X-Token': 'tok' });
    expect(toEndpoint(base({ headers: { 'X-Token': 'tok' }, headers_sealed: false }), config, codec).headers).toEqual({ 'X-Token': 'tok' });
    // A next secret sealed as the current one does not open.
    const swapped = base({ secret_next: codec.seal('row-next', secretContext('row', 'secret')), rotate_until: until });
    expect(() => toEndpoint(swapped, config, codec)).toThrow(/failed authentication/);
  });
});

describe('the table fingerprint and the purge of tombstones', () => {
  it('changes with every insert, update and tombstone', async () => {
    const empty = await storedVersion(db.pool);
    expect(empty).toBe('0:');
    await insert('fp');
    const one = await storedVersion(db.pool);
    expect(one).toMatch(/^1:\d{4}-/);
    await db.pool.query(`update endpoints set description = 'x', updated_at = clock_timestamp() where name = 'fp'`);
    const two = await storedVersion(db.pool);
    expect(new Set([empty, one, two]).size).toBe(3);
  });

  it('deletes tombstones older than the retention only, and counts them', async () => {
    for (const n of ['live', 'recent', 'old-1', 'old-2']) await insert(n);
    await db.pool.query(`update endpoints set deleted_at = now() - interval '10 minutes' where name = 'recent'`);
    await db.pool.query(`update endpoints set deleted_at = now() - interval '2 hours' where name like 'old-%'`);
    expect(await purgeTombstones(db.pool, 3_600_000)).toBe(2);
    const left = await db.pool.query<{ name: string }>(`select name from endpoints order by name`);
    expect(left.rows.map((r) => r.name)).toEqual(['live', 'recent']);
    expect(await purgeTombstones(db.pool, 3_600_000)).toBe(0);
    expect((await readStoredEndpoints(db.pool)).map((r) => r.name)).toEqual(['live']);
  });
});
