// The topic catalog (docs/operations.md#topic-catalog): declared in the config and managed through
// /v1/topics and the CLI, each schema compiled and its examples checked before anything is written,
// versions added and never edited, audited, and live in a second process within a second.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { TopicCatalog } from '../../src/topics/catalog.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { runCliInProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

let db: TestDatabase;
let a: Api;
let b: Api;
let admin: string;
let viewer: string;

const ORDER = {
  type: 'object',
  properties: { order_id: { type: 'string' }, total: { type: 'number' } },
  required: ['order_id'],
  additionalProperties: false,
};

const CONFIG = {
  topics: {
    catalog: {
      'shop.opened': {
        description: 'a shop opened',
        schema: { type: 'object', properties: { shop: { type: 'string' } } },
        examples: [{ shop: 'x' }],
      },
    },
  },
  notify: {
    webhook: {
      allow_networks: ['127.0.0.0/8'],
      endpoints: [{ name: 'orders', url: 'http://127.0.0.1:9/o', secret: 's', topics: ['order.*', 'nothing.here'] }],
    },
  },
};

beforeAll(async () => {
  db = await createTestDatabase();
  const codec = codecOf(new SecretBox(randomBytes(32)))!;
  [a, b] = await Promise.all([startApi(db, CONFIG, 'serve', { secretCodec: codec }), startApi(db, CONFIG)]);
  admin = await makeUser(db.pool, 'cat-admin', 'admin');
  viewer = await makeUser(db.pool, 'cat-viewer', 'viewer');
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await db?.drop();
});

describe('the topic catalog', () => {
  it('config topics are written once at start (two processes, one version), and refuse changes through the API', async () => {
    const res = await call(a.url, 'GET', '/v1/topics/shop.opened', { token: viewer });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'shop.opened', source: 'config', version: 1, effective_validation: 'warn', endpoints: [] });
    expect(res.body.versions).toHaveLength(1);
    const patch = await call(a.url, 'PATCH', '/v1/topics/shop.opened', { token: admin, body: { description: 'x' } });
    expect(patch.status).toBe(409);
    expect(patch.body.error.code).toBe('config_topic');
  });

  it('a config schema that does not compile stops the start, naming its key; nothing is written', async () => {
    const bad = { topics: { catalog: { 'shop.closed': { schema: { type: 'object', required: 'shop' }, examples: [{}] } } } };
    await expect(startApi(db, bad)).rejects.toThrow(/^topics\.catalog\.shop\.closed\.schema: does not compile: /);
    const ex = { topics: { catalog: { 'shop.closed': { schema: { required: ['shop'] }, examples: [{ shop: 1 }, {}] } } } };
    await expect(startApi(db, ex)).rejects.toThrow('topics.catalog.shop.closed.examples/1: does not match its schema');
    expect((await db.pool.query(`select 1 from topics where name = 'shop.closed'`)).rowCount).toBe(0);
  });

  it('create: a schema that does not compile, or an example that does not match, is a 400 naming it; nothing is written', async () => {
    const bad = await call(a.url, 'POST', '/v1/topics', {
      token: admin,
      body: { name: 'order.bad', schema: { type: 'objekt' }, examples: [{}] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^schema: does not compile: /);
    const typo = await call(a.url, 'POST', '/v1/topics', {
      token: admin,
      body: { name: 'order.bad', schema: { requird: ['a'] }, examples: [{}] },
    });
    expect(typo.body.error.message).toContain('unknown keyword: "requird"');
    const ex = await call(a.url, 'POST', '/v1/topics', {
      token: admin,
      body: { name: 'order.bad', schema: ORDER, examples: [{ order_id: 'a' }, { total: 1 }] },
    });
    expect(ex.status).toBe(400);
    expect(ex.body.error.message).toBe('examples/1: does not match its schema: examples/1/order_id: required');
    expect((await call(a.url, 'GET', '/v1/topics/order.bad', { token: viewer })).status).toBe(404);
    const byViewer = await call(a.url, 'POST', '/v1/topics', {
      token: viewer,
      body: { name: 'order.x', schema: ORDER, examples: [{ order_id: 'a' }] },
    });
    expect(byViewer.status).toBe(403);
  });

  it('create, then a new version: audited, versions kept, live in the other process within a second', async () => {
    // A catalog that polls hourly: only the NOTIFY can tell it within the test.
    const byNotify = new TopicCatalog({
      pool: db.pool,
      listenHub: b.svc.listenHub,
      channel: b.svc.channels.topics,
      config: b.svc.config,
      log: b.svc.log,
      pollMs: 3_600_000,
    });
    await byNotify.start();
    const created = await call(a.url, 'POST', '/v1/topics', {
      token: admin,
      body: { name: 'order.created', description: 'an order was placed', schema: ORDER, examples: [{ order_id: 'o-1', total: 3 }] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'order.created', version: 1, source: 'api', endpoints: ['orders'] });
    const t0 = Date.now();
    await waitFor(() => b.svc.topics.get('order.created'), 5_000, 10);
    const seenMs = Date.now() - t0;

    const v2 = { ...ORDER, required: ['order_id', 'total'] };
    const added = await call(a.url, 'POST', '/v1/topics/order.created/versions', {
      token: admin,
      body: { schema: v2, examples: [{ order_id: 'o', total: 1 }] },
    });
    expect(added.status).toBe(201);
    expect(added.body.version).toBe(2);
    expect(added.body.versions.map((v: { version: number }) => v.version)).toEqual([1, 2]);
    expect(added.body.versions[0].schema).toEqual(ORDER);
    await waitFor(() => b.svc.topics.get('order.created')?.versions.length === 2 || undefined, 5_000, 10);
    await waitFor(() => byNotify.get('order.created')?.versions.length === 2 || undefined, 5_000, 10);
    await byNotify.stop();

    const audit = await db.pool.query<{ action: string; actor: string }>(
      `select action, actor from audit_log where target_type = 'topic' and target_id = 'order.created' order by id`,
    );
    expect(audit.rows).toEqual([
      { action: 'topic.created', actor: 'cat-admin' },
      { action: 'topic.version_added', actor: 'cat-admin' },
    ]);
    // NOTIFY, not the poll: well within the second the poll would take.
    expect(seenMs).toBeLessThan(1_000);
  });

  it('PATCH: deprecated, archived, a validation mode of its own', async () => {
    const res = await call(a.url, 'PATCH', '/v1/topics/order.created', {
      token: admin,
      body: { deprecated: true, deprecation_note: 'use order.placed', validation: 'enforce' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      deprecated: true,
      deprecation_note: 'use order.placed',
      validation: 'enforce',
      effective_validation: 'enforce',
    });
    await waitFor(() => b.svc.topics.get('order.created')?.validation === 'enforce' || undefined, 5_000, 10);
    const cleared = await call(a.url, 'PATCH', '/v1/topics/order.created', { token: admin, body: { validation: null, deprecated: false } });
    expect(cleared.body).toMatchObject({ validation: null, effective_validation: 'warn', deprecated: false });
  });

  it('an endpoint pattern that matches nothing in the catalog is a warning in its answer', async () => {
    const res = await call(a.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'typo', url: 'http://127.0.0.1:9/x', topics: ['order.created', 'ordr.*'] },
    });
    expect(res.status).toBe(201);
    expect(res.body.warnings).toEqual(['topics: "ordr.*" matches no topic of the catalog']);
    const fixed = await call(a.url, 'PATCH', '/v1/endpoints/typo', { token: admin, body: { topics: ['order.*'] } });
    expect(fixed.status).toBe(200);
    expect(fixed.body.warnings).toBeUndefined();
  });

  it('CLI: list, show, add (and a new version), archive, with the same checks', async () => {
    const env = { ...process.env, DATABASE_URL: db.url, USER: 'tester' };
    const bad = await runCliInProcess(
      ['topics', 'add', 'user.signed_up', '--schema', '{"type":"object","required":["id"]}', '--example', '{}'],
      env,
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('examples/0: does not match its schema: examples/0/id: required');
    const add = await runCliInProcess(
      [
        'topics',
        'add',
        'user.signed_up',
        '--schema',
        '{"type":"object","required":["id"]}',
        '--example',
        '{"id":1}',
        '--description',
        'hello',
      ],
      env,
    );
    expect(add.code).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({ name: 'user.signed_up', version: 1, description: 'hello' });
    const v2 = await runCliInProcess(
      ['topics', 'add', 'user.signed_up', '--new-version', '--schema', '{"type":"object"}', '--example', '{}'],
      env,
    );
    expect(JSON.parse(v2.stdout).version).toBe(2);
    await waitFor(() => a.svc.topics.get('user.signed_up')?.versions.length === 2 || undefined, 5_000, 10);
    const list = await runCliInProcess(['topics', 'list', '--json'], env);
    expect(
      list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).name),
    ).toEqual(['order.created', 'shop.opened', 'user.signed_up']);
    const archived = await runCliInProcess(['topics', 'archive', 'user.signed_up'], env);
    expect(JSON.parse(archived.stdout).archived).toBe(true);
    const show = await runCliInProcess(['topics', 'show', 'user.signed_up'], env);
    expect(JSON.parse(show.stdout)).toMatchObject({ archived: true, versions: [{ version: 1 }, { version: 2 }] });
    const audit = await db.pool.query(`select action, actor from audit_log where target_id = 'user.signed_up' order by id`);
    expect(audit.rows.map((r) => `${r.action} ${r.actor}`)).toEqual([
      'topic.created cli:tester',
      'topic.version_added cli:tester',
      'topic.updated cli:tester',
    ]);
  });
});
