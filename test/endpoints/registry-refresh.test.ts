// The registry's forced re-read (src/endpoints/registry.ts): what the API answers after a create or
// a change is read from the registry, so a forced refresh must see a change committed before it.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { ListenHub } from '../../src/db/listen-hub.js';
import { EndpointRegistry } from '../../src/endpoints/registry.js';
import { codecOf, createStoredEndpoint } from '../../src/endpoints/store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs } from '../helpers/logs.js';
import { testConfig } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** A pool whose answers to the registry's read of the rows are held back, once asked to, until `release()`. */
function holdingPool(pool: pg.Pool): { pool: pg.Pool; hold: () => void; release: () => void; held: () => number } {
  let gate: Promise<void> | null = null;
  let open: (() => void) | null = null;
  let held = 0;
  const wrapped = new Proxy(pool, {
    get(target, key) {
      if (key !== 'query') return Reflect.get(target, key);
      return async (...args: Parameters<pg.Pool['query']>) => {
        const wait = /deleted_at is null/.test(String(args[0])) ? gate : null;
        const res: unknown = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
        if (wait) {
          held++;
          await wait;
        }
        return res;
      };
    },
  });
  return {
    pool: wrapped,
    hold: () => {
      gate = new Promise((r) => (open = r));
    },
    release: () => {
      gate = null;
      open?.();
    },
    held: () => held,
  };
}

describe('EndpointRegistry.refresh(true)', () => {
  it('made while a read is under way that began before a create committed, resolves only once the endpoint is seen', async () => {
    const codec = codecOf(new SecretBox(randomBytes(32)))!;
    const config = testConfig(db, {});
    const { log } = captureLogs();
    const hub = new ListenHub({ url: db.url });
    const p = holdingPool(db.pool);
    const registry = new EndpointRegistry({
      pool: p.pool,
      listenHub: hub,
      channel: 'x.endpoint_defs',
      config,
      codec,
      log,
      pollMs: 3_600_000,
    });
    await registry.start();
    try {
      // A read reads the rows now, before the create, and its answer is held back.
      p.hold();
      const first = registry.refresh(true);
      await expect.poll(() => p.held()).toBe(1);
      await createStoredEndpoint(
        { pool: db.pool, codec, configNames: new Set(), channel: 'x.endpoint_defs', serviceTopics: [], tombstoneMs: 0 },
        { name: 'fresh', url: 'https://example.com/hook', topics: ['*'] },
        { name: 'tester', role: 'admin' },
      );
      // What the create route does next: a forced refresh, then the endpoint read from the registry.
      const forced = registry.refresh(true);
      p.release();
      await forced;
      expect(registry.byName.has('fresh')).toBe(true);
      await first;
    } finally {
      await registry.stop();
      await hub.close();
    }
  });
});
