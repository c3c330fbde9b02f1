// The OpenAPI document as a client team takes it: what Redocly's recommended rules say of the served
// document, where it says the API is, the committed snapshot (docs/openapi.json) and the breaking
// changes it guards against, and the webhooks section against a real delivery.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { breakingChanges } from '../../src/http/contract/breaking.js';
import { LINT_WARNINGS, openApiDocument } from '../../src/http/contract/document.js';
import { BREAKING, NOT_BREAKING } from '../fixtures/openapi-changes.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { checkWebhook } from '../helpers/contract.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

type Json = Record<string, unknown>;
const SNAPSHOT = fileURLToPath(new URL('../../docs/openapi.json', import.meta.url));
const committed = (): Json => JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Json;
const clone = (j: Json): Json => JSON.parse(JSON.stringify(j)) as Json;

let db: TestDatabase;
let rx: Receiver;
let api: Api;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, {
    notify: {
      webhook: {
        endpoints: [
          {
            name: 'acw',
            url: `${rx.url}/acw`,
            secret: 'acw-secret',
            topics: ['a.*'],
            secret_next: 'next-secret',
            rotate_until: '2099-01-01T00:00:00Z',
          },
          { name: 'std', url: `${rx.url}/std`, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', scheme: 'standard', topics: ['a.*'] },
        ],
      },
    },
  });
});
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

describe("Redocly's recommended rules", () => {
  it('find no error in the served document, and only the warnings the generator explains', async () => {
    const served = await call(api.url, 'GET', '/openapi.json');
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: served.text, absoluteRef: `${api.url}/openapi.json`, config });
    const shown = problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`);
    expect(shown.filter((p) => p.startsWith('error'))).toEqual([]);
    const accepted = LINT_WARNINGS.flatMap((w) => w.at.map((path) => `${w.rule} ${path}`));
    const warned = problems.map((p) => {
      const pointer = p.location[0]?.pointer ?? '';
      const path = /^#\/paths\/([^/]+)/.exec(pointer)?.[1]?.replace(/~1/g, '/') ?? pointer;
      return `${p.ruleId} ${path}`;
    });
    expect(warned.toSorted()).toEqual(accepted.toSorted());
  });
});

describe('servers', () => {
  it('is the address the server listens on, or server.public_url', async () => {
    expect((await call(api.url, 'GET', '/openapi.json')).body.servers).toEqual([{ url: api.url }]);
    const behind = await startApi(db, { server: { public_url: 'https://acw.example.com/hooks/' } });
    try {
      expect((await call(behind.url, 'GET', '/openapi.json')).body.servers).toEqual([{ url: 'https://acw.example.com/hooks' }]);
    } finally {
      await behind.close();
    }
  });
});

describe('the committed snapshot, docs/openapi.json', () => {
  it('has no change that breaks its clients: a break needs `npm run docs -- --accept-breaking` in the same commit', () => {
    expect(breakingChanges(committed(), openApiDocument())).toEqual([]);
  });

  it('is the document (npm run docs)', () => {
    expect(committed(), 'docs/openapi.json is out of date: run npm run docs').toEqual(JSON.parse(JSON.stringify(openApiDocument())));
  });

  it.each(BREAKING.map((c) => [c.name, c] as const))('a breaking change is found: %s', (_name, change) => {
    const after = clone(committed());
    change.apply(after);
    const found = breakingChanges(committed(), after);
    expect(found).toContainEqual(expect.stringMatching(change.finds!));
  });

  it('changes that break no client are not reported', () => {
    const after = clone(committed());
    for (const c of NOT_BREAKING) c.apply(after);
    expect(breakingChanges(committed(), after)).toEqual([]);
  });
});

describe('the webhooks section', () => {
  it('describes what a receiver gets: body and headers, in both schemes and during a rotation', async () => {
    const token = await makeUser(db.pool, 'hooks', 'service');
    const res = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: { n: [1, null, 'x'] } } });
    expect(res.status).toBe(202);
    const got = await rx.waitForRequests(2);
    const byPath = new Map(got.map((r) => [r.url, r]));
    for (const [path, hook] of [
      ['/acw', 'delivery'],
      ['/std', 'standardDelivery'],
    ] as const) {
      const r = byPath.get(path)!;
      expect(checkWebhook(hook, r.headers, r.body.toString('utf8'))).toEqual([]);
    }
    expect(byPath.get('/acw')!.headers['x-acw-signature-next']).toBeDefined();
    // And the check does find a delivery that is not as documented.
    const r = byPath.get('/acw')!;
    const wrong = checkWebhook('delivery', { ...r.headers, 'x-acw-timestamp': undefined }, '{"event_id":"x"}');
    expect(wrong).toContainEqual(expect.stringContaining('header x-acw-timestamp missing'));
    expect(wrong).toContainEqual(expect.stringContaining("must have required property 'topic'"));
  });
});
