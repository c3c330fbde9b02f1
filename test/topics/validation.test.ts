// Validation at notify (docs/operations.md#topic-catalog) on every write path: POST /v1/notify, the
// batch, the CLI and the outbox (at dispatch). Under enforce the refusal names each JSON Pointer and
// nothing is written; under warn the event goes out with its warnings, a log line and a metric; the
// schema version an event was validated against is recorded and sent as X-ACW-Schema-Version.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify } from '../../src/outbox.js';
import { checkEvents } from '../../src/topics/check.js';
import type { Topic } from '../../src/topics/rows.js';
import { addTopicVersion, createTopic } from '../../src/topics/store.js';
import { call, makeUser, metricValue, rowCounts, startApi, type Api } from '../helpers/api.js';
import { runCliInProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let token: string;

const ORDER = {
  type: 'object',
  properties: { order_id: { type: 'string' }, total: { type: 'number' } },
  required: ['order_id'],
};
const decl = (validation?: string) => ({ schema: ORDER, examples: [{ order_id: 'o-1' }], ...(validation ? { validation } : {}) });

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, {
    topics: { catalog: { 'order.paid': decl('enforce'), 'order.noted': decl(), 'order.quiet': decl('off') } },
    notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } },
  });
  token = await makeUser(db.pool, 'shop', 'service');
});
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

const post = (path: string, body: unknown) => call(api.url, 'POST', path, { token, body });
const eventOf = async (id: string) =>
  (
    await db.pool.query<{ schema_version: number | null; rejected: string | null }>(
      `select schema_version, rejected from event_log where id = $1`,
      [id],
    )
  ).rows[0];

describe('enforce', () => {
  it('POST /v1/notify: 400 naming every pointer, nothing written', async () => {
    const before = await rowCounts(db.pool);
    const res = await post('/v1/notify', { topic: 'order.paid', data: { total: 'x', extra: 1 } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'schema_mismatch',
      message: '/data/order_id: required (and 1 more)',
      details: {
        field: '/data/order_id',
        problems: [
          { pointer: '/data/order_id', message: 'required' },
          { pointer: '/data/total', message: 'must be number' },
        ],
      },
    });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('the batch: 400 with /events/N pointers, no event of it written', async () => {
    const before = await rowCounts(db.pool);
    const ok = { topic: 'order.paid', data: { order_id: 'a' } };
    const res = await post('/v1/notify/batch', { events: [ok, ok, ok, { topic: 'order.paid', data: {} }] });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe('/events/3/data/order_id: required');
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('the CLI: refused with the pointer, nothing written', async () => {
    const before = await rowCounts(db.pool);
    const out = await runCliInProcess(['notify', 'order.paid', '--data', '{"total":1}'], { ...process.env, DATABASE_URL: db.url });
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain('/data/order_id: required');
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('the outbox: marked rejected at dispatch, delivered to no one, an alert naming topic and pointer', async () => {
    const id = await notify(db.pool, 'order.paid', { total: 2 });
    const ev = await waitFor(async () => (await eventOf(id))?.rejected ?? undefined);
    expect(ev).toBe('/data/order_id: required');
    expect((await db.pool.query(`select 1 from jobs where event_id = $1`, [id])).rowCount).toBe(0);
    const alert = await db.pool.query(`select details from audit_log where action = 'topic.event_rejected' and target_id = $1`, [id]);
    expect(alert.rows[0].details).toMatchObject({ topic: 'order.paid', pointer: '/data/order_id', problems: ['/data/order_id: required'] });
    const alerts = await call(api.url, 'GET', '/v1/alerts', { token: await makeUser(db.pool, 'ops', 'admin') });
    expect(alerts.body.items.some((a: { action: string }) => a.action === 'topic.event_rejected')).toBe(true);
  });
});

describe('warn (the default) and off', () => {
  it('accepted with warnings per event, a log line and a metric; off checks nothing', async () => {
    const one = await post('/v1/notify', { topic: 'order.noted', data: { total: 1 } });
    expect(one.status).toBe(202);
    expect(one.body).toMatchObject({ schema_version: 1, warnings: ['/data/order_id: required'] });
    const batch = await post('/v1/notify/batch', {
      events: [
        { topic: 'order.noted', data: { order_id: 'a' } },
        { topic: 'order.noted', data: { order_id: 7 } },
        { topic: 'order.quiet', data: { order_id: 7 } },
        { topic: 'not.declared', data: 'anything' },
      ],
    });
    expect(batch.status).toBe(202);
    const r = batch.body.results;
    expect(r[0].warnings).toBeUndefined();
    expect(r[1].warnings).toEqual(['/events/1/data/order_id: must be string']);
    expect(r[2].warnings).toBeUndefined();
    expect(r[3]).not.toHaveProperty('schema_version');
    expect(api.events('notify.schema_mismatch').map((l) => `${l['topic']} ${l['mode']}`)).toEqual(
      expect.arrayContaining(['order.noted warn', 'order.paid enforce']),
    );
    const metrics = (await call(api.url, 'GET', '/metrics')).text;
    expect(metricValue(metrics, 'acw_topic_schema_mismatches_total', { topic: 'order.noted', mode: 'warn' })).toBe(2);
  });

  it('the outbox under warn: delivered, with its version recorded and a warning logged', async () => {
    const id = await notify(db.pool, 'order.noted', { total: 5 });
    const got = await waitFor(() => rx.requests.find((q) => q.body.toString().includes(id)));
    expect(got.headers['x-acw-schema-version']).toBe('1');
    expect(await eventOf(id)).toEqual({ schema_version: 1, rejected: null });
  });
});

describe('schema versions', () => {
  it('recorded per event and sent as X-ACW-Schema-Version; a new version applies to new events only (CLI path too)', async () => {
    const ctx = { pool: db.pool, channel: api.svc.channels.topics };
    await createTopic(ctx, { name: 'invoice.sent', schema: { type: 'object' }, examples: [{}] }, 'test');
    await api.svc.topics.refresh(true);
    const first = await post('/v1/notify', { topic: 'invoice.sent', data: { n: 1 } });
    expect(first.body.schema_version).toBe(1);
    await addTopicVersion(ctx, 'invoice.sent', { schema: { type: 'object', required: ['n'] }, examples: [{ n: 1 }] }, 'test');
    await api.svc.topics.refresh(true);
    const second = await post('/v1/notify', { topic: 'invoice.sent', data: { n: 2 } });
    expect(second.body).toMatchObject({ schema_version: 2 });
    expect(second.body.warnings).toBeUndefined();
    // The one-statement path (no worker pool in the CLI) records it too, in the event and its job.
    const dir = mkdtempSync(join(tmpdir(), 'acw-topics-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(file, `notify:\n  webhook:\n    url: ${rx.url}\n    secret: s3cret\n    topics: ["*"]\n`);
    const cli = await runCliInProcess(['notify', 'invoice.sent', '--data', '{"n":3}', '-c', file], {
      ...process.env,
      DATABASE_URL: db.url,
    });
    rmSync(dir, { recursive: true });
    const third = JSON.parse(cli.stdout);
    expect(third.schema_version).toBe(2);

    expect((await eventOf(first.body.event_id))?.schema_version).toBe(1);
    expect((await eventOf(second.body.event_id))?.schema_version).toBe(2);
    expect((await eventOf(third.event_id))?.schema_version).toBe(2);
    const header = async (eventId: string) =>
      (await waitFor(() => rx.requests.find((q) => q.body.toString().includes(eventId)))).headers['x-acw-schema-version'];
    expect([await header(first.body.event_id), await header(second.body.event_id), await header(third.event_id)]).toEqual(['1', '2', '2']);
    // The body keeps its four fields.
    const body = JSON.parse((await waitFor(() => rx.requests.find((q) => q.body.toString().includes(third.event_id)))).body.toString());
    expect(Object.keys(body)).toEqual(['event_id', 'topic', 'occurred_at', 'data']);
  });
});

const topic = (name: string, archived = false): Topic => ({
  name,
  description: '',
  deprecated: name === 'old.one',
  deprecation_note: 'use new.one',
  archived,
  validation: null,
  source: 'api',
  created_at: '',
  updated_at: '',
  versions: [{ version: 1, schema: {}, examples: [], created_by: 'x', created_at: '' }],
});

describe('topics.require_declared', () => {
  const list = [topic('a.b'), topic('old.one'), topic('gone.one', true)];
  const view = (requireDeclared: boolean) => ({
    get: (n: string) => list.find((t) => t.name === n),
    topics: list,
    mode: 'warn' as const,
    requireDeclared,
  });

  it('refuses a topic not in the catalog, or archived; accepts it when off; a deprecated topic is a warning', () => {
    expect(checkEvents(view(false), [{ topic: 'x.y', data: 1 }], false)).toEqual([{}]);
    expect(() =>
      checkEvents(
        view(true),
        [
          { topic: 'a.b', data: 1 },
          { topic: 'x.y', data: 1 },
        ],
        true,
      ),
    ).toThrow('/events/1/topic: is not in the topic catalog (topics.require_declared)');
    expect(() => checkEvents(view(true), [{ topic: 'gone.one', data: 1 }], false)).toThrow('/topic: is archived (topics.require_declared)');
    expect(checkEvents(view(true), [{ topic: 'old.one', data: 1 }], false)).toEqual([
      { schema_version: 1, warnings: ['topic old.one is deprecated: use new.one'] },
    ]);
  });
});
