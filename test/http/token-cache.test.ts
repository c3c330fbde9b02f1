import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/admin/users.js';
import { TokenCache } from '../../src/admin/token-cache.js';
import { hashToken, newToken } from '../../src/users.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';

const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));
const run = promisify(execFile);

/** A lookup that knows `known` (token -> principal), counts its calls, and fails while `down`. */
function fakeLookup(known: Map<string, Principal>) {
  const byHash = (): Map<string, Principal> => new Map([...known].map(([t, p]) => [hashToken(t), p]));
  const state = {
    calls: 0,
    down: false,
    lookup: async (hash: string): Promise<Principal | null> => {
      state.calls++;
      if (state.down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      return byHash().get(hash) ?? null;
    },
  };
  return state;
}

const get = (api: Api, token: string) => call(api.url, 'GET', '/v1/notifications', { token });
const user = (name: string): Principal => ({ id: name, name, role: 'service' });

describe('TokenCache', () => {
  it('never holds more than maxEntries, dropping the least recently used', async () => {
    const known = new Map(Array.from({ length: 10 }, (_, i) => [`t${i}`, user(`u${i}`)] as const));
    const db = fakeLookup(known);
    const cache = new TokenCache(db.lookup, { maxEntries: 3, ttlMs: 60_000 });
    try {
      for (const t of ['t0', 't1', 't2']) await cache.authenticate(t);
      await cache.authenticate('t0'); // t1 is now the least recently used
      for (let i = 3; i < 10; i++) {
        await cache.authenticate(`t${i}`);
        expect(cache.size).toBeLessThanOrEqual(3);
      }
      expect(cache.size).toBe(3);
      const before = db.calls;
      expect(await cache.authenticate('t9')).toEqual(user('u9'));
      expect(db.calls).toBe(before);
      await cache.authenticate('t0');
      expect(db.calls).toBe(before + 1);
    } finally {
      cache.close();
    }
  });

  it('keeps no unknown token: random tokens leave it empty, and a token known later works at once', async () => {
    const known = new Map<string, Principal>();
    const db = fakeLookup(known);
    const cache = new TokenCache(db.lookup, { ttlMs: 60_000 });
    try {
      for (let i = 0; i < 1000; i++) expect(await cache.authenticate(newToken())).toBeNull();
      expect(await cache.authenticate('later')).toBeNull();
      expect(cache.size).toBe(0);
      known.set('later', user('later'));
      expect(await cache.authenticate('later')).toEqual(user('later'));
      expect(cache.size).toBe(1);
    } finally {
      cache.close();
    }
  });

  it('a database outage: cached tokens still authenticate until their TTL runs out, then the error is thrown', async () => {
    let now = 0;
    const db = fakeLookup(new Map([['a', user('a')]]));
    const cache = new TokenCache(db.lookup, { ttlMs: 1000, now: () => now });
    try {
      expect(await cache.authenticate('a')).toEqual(user('a'));
      db.down = true;
      now = 999;
      expect(await cache.authenticate('a')).toEqual(user('a'));
      await expect(cache.authenticate('b')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      now = 1000;
      await expect(cache.authenticate('a')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      db.down = false;
      expect(await cache.authenticate('a')).toEqual(user('a'));
    } finally {
      cache.close();
    }
  });

  it('an eviction while a lookup is in flight keeps what it read out of the cache', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const cache = new TokenCache(async () => {
      await gate;
      return user('a');
    });
    try {
      const pending = cache.authenticate('a');
      cache.evictUser('a');
      release();
      expect(await pending).toEqual(user('a'));
      expect(cache.size).toBe(0);
    } finally {
      cache.close();
    }
  });
});

describe('auth through the cache, two processes', () => {
  let db: TestDatabase;
  let a: Api;
  let b: Api;
  let clock = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    a = await startApi(db, { jobs: { enabled: false } });
    // B trusts a cached token for an hour: only the revoke's NOTIFY can make it forget one in time.
    b = await startApi(db, { jobs: { enabled: false } }, 'serve', { tokenCache: { ttlMs: 3_600_000, now: () => clock } });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });
  beforeEach(() => {
    clock = 0;
  });

  const cli = (...args: string[]) =>
    run(process.execPath, [BIN, ...args], { env: { ...process.env, DATABASE_URL: db.url, USER: 'tester' } });

  it('a revoke by `users revoke` (another process) refuses the token in both servers, warm caches and all, within the TTL', async () => {
    const token = await makeUser(db.pool, 'leaky', 'service');
    for (const api of [a, b]) expect((await get(api, token)).status).toBe(200);
    expect(b.svc.tokenCache().size).toBe(1);
    await cli('users', 'revoke', 'leaky');
    // a's TTL is the default; b's is an hour and its clock stands still, so b refuses only through the NOTIFY.
    const bound = a.svc.tokenCache().ttlMs + 1_000;
    await waitFor(async () => (await get(a, token)).status === 401, bound);
    await waitFor(async () => (await get(b, token)).status === 401, bound);
    expect(b.svc.tokenCache().size).toBe(0);
  });

  it('a token made after a failed attempt works at once: unknown tokens are not cached', async () => {
    const token = newToken();
    expect((await get(b, token)).status).toBe(401);
    await db.pool.query(`insert into users (name, role, token_hash) values ('fresh', 'viewer', $1)`, [hashToken(token)]);
    expect((await get(b, token)).status).toBe(200);
  });

  it('a database outage: a cached token keeps its answers (403 here) for the TTL, then the request is a 503', async () => {
    const viewer = await makeUser(db.pool, 'watcher', 'viewer');
    const cold = await makeUser(db.pool, 'cold', 'service');
    expect((await get(b, viewer)).status).toBe(200);
    const pool = b.svc.db.pool;
    const query = pool.query.bind(pool);
    pool.query = (() => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))) as never;
    try {
      const notify = (token: string) => call(b.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: 1 } });
      expect((await notify(viewer)).status).toBe(403);
      expect((await notify(cold)).status).toBe(503);
      clock += b.svc.tokenCache().ttlMs;
      const after = await notify(viewer);
      expect([after.status, after.body.error.code, after.headers.get('retry-after')]).toEqual([503, 'unavailable', '1']);
    } finally {
      pool.query = query;
    }
    expect((await get(b, viewer)).status).toBe(200);
  });
});
