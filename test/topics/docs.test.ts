// The catalog for receivers (docs/receivers.md#topics): GET /asyncapi.json, an AsyncAPI 3.0 document
// that the official parser reads with no error, and each topic's delivery in the OpenAPI document's
// `webhooks`, which Redocly's recommended rules find no error in. Both follow the catalog live.
import { Parser } from '@asyncapi/parser';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTopicVersion, createTopic } from '../../src/topics/store.js';
import { call, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let api: Api;

const ORDER = {
  type: 'object',
  properties: { order_id: { type: 'string' }, lines: { type: 'array', items: { $ref: '#/$defs/line' } } },
  required: ['order_id'],
  $defs: { line: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] } },
};

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db, {
    topics: {
      catalog: {
        'user.signed_up': {
          description: 'a user signed up',
          schema: { type: 'object', properties: { email: { type: 'string' } } },
          examples: [{ email: 'a@b.c' }],
        },
      },
    },
  });
  const ctx = { pool: db.pool, channel: api.svc.channels.topics };
  await createTopic(
    ctx,
    { name: 'order.created', description: 'an order', schema: ORDER, examples: [{ order_id: 'o-1', lines: [{ sku: 'a' }] }] },
    't',
  );
  await addTopicVersion(
    ctx,
    'order.created',
    { schema: { ...ORDER, required: ['order_id', 'lines'] }, examples: [{ order_id: 'o', lines: [] }] },
    't',
  );
  await createTopic(ctx, { name: 'old.topic', deprecated: true, deprecation_note: 'use order.created', schema: {}, examples: [1] }, 't');
  await api.svc.topics.refresh(true);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('GET /asyncapi.json', () => {
  it('is an AsyncAPI 3.0 document of every topic that @asyncapi/parser reads with no error', async () => {
    const res = await call(api.url, 'GET', '/asyncapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    const { document, diagnostics } = await new Parser().parse(res.text);
    expect(diagnostics.filter((d) => d.severity === 0).map((d) => `${d.path.join('/')}: ${d.message}`)).toEqual([]);
    expect(document).toBeDefined();
    expect(
      document!
        .channels()
        .all()
        .map((c) => c.address()),
    ).toEqual(['old.topic', 'order.created', 'user.signed_up']);
    const msg = res.body.components.messages['order.created.v2'];
    expect(msg.headers.properties['X-ACW-Schema-Version']).toMatchObject({ const: '2' });
    expect(msg.examples[0].payload.data).toEqual({ order_id: 'o', lines: [] });
    // Every version is there; the local reference of each points inside its own copy.
    expect(res.body.components.schemas['order.created.v1'].properties.lines.items).toEqual({
      $ref: '#/components/schemas/order.created.v1/$defs/line',
    });
    expect(res.body.info.description).toContain('HMAC-SHA256');
    expect(res.body.channels['old.topic'].description).toBe('Deprecated: use order.created.');
  });
});

describe('the OpenAPI webhooks', () => {
  it("each topic's delivery, its schema versions in components; Redocly finds no error", async () => {
    const res = await call(api.url, 'GET', '/openapi.json');
    expect(Object.keys(res.body.webhooks)).toEqual([
      'delivery',
      'standardDelivery',
      'topic.old.topic',
      'topic.order.created',
      'topic.user.signed_up',
    ]);
    expect(res.body.webhooks['topic.order.created'].post.requestBody.content['application/json'].schema.properties.data).toEqual({
      $ref: '#/components/schemas/order.created.v2',
    });
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: res.text, absoluteRef: `${api.url}/openapi.json`, config });
    expect(problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
  });

  it('follows the catalog: a new topic is in both documents at once', async () => {
    await createTopic({ pool: db.pool, channel: api.svc.channels.topics }, { name: 'late.one', schema: {}, examples: [null] }, 't');
    await api.svc.topics.refresh(true);
    expect((await call(api.url, 'GET', '/asyncapi.json')).body.channels['late.one']).toBeDefined();
    expect((await call(api.url, 'GET', '/openapi.json')).body.webhooks['topic.late.one']).toBeDefined();
  });
});
