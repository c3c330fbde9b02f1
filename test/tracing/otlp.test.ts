import { context, ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client.js';
import { notify, notifyMany } from '../../src/outbox.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startOtlpReceiver, type OtlpReceiver, type OtlpSpan } from '../helpers/otlp.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

// Traces exported to a real OTLP/HTTP receiver on 127.0.0.1, in JSON and in protobuf
// (docs/operations.md#tracing): a producer trace per notify, each delivery attempt a trace of its
// own linked to it, the context carried through the outbox, the client, retries and the dead letter.

const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;

// Values that must appear in no exported span.
const SECRETS = [
  'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  'endpoint-secret-AAAA1111',
  'header-token-BBBB2222',
  'query-secret-CCCC3333',
  'endpoint-secret-EEEE5555',
  'otlp-key-DDDD4444',
];

const STD_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

const remote = (traceId: string, spanId: string, sampled = true): Context =>
  trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: sampled ? 1 : 0, isRemote: true });
const tp = (p: { traceId: string; spanId: string }, flags: string) => `00-${p.traceId}-${p.spanId}-${flags}`;
const P1 = { traceId: '1'.repeat(32), spanId: 'a'.repeat(16) };
const P2 = { traceId: '2'.repeat(32), spanId: 'b'.repeat(16) };
const P3 = { traceId: '3'.repeat(32), spanId: 'c'.repeat(16) };
const P4 = { traceId: '4'.repeat(32), spanId: 'd'.repeat(16) };

let db: TestDatabase;
let flaky: Receiver;
let plain: Receiver;
let doomed: Receiver;
let std: Receiver;
const seen = new Set<string>();

beforeAll(async () => {
  db = await createTestDatabase();
  // The first attempt of each delivery fails, the second gets through.
  flaky = await startReceiver((req) => {
    const id = String(req.headers['x-acw-event-id']);
    if (seen.has(id)) return { status: 200, body: 'ok' };
    seen.add(id);
    return { status: 500, body: 'try again' };
  });
  plain = await startReceiver();
  doomed = await startReceiver(() => ({ status: 500, body: 'never' }));
  std = await startReceiver();
});
afterAll(async () => {
  await Promise.all([flaky.close(), plain.close(), doomed.close(), std.close()]);
  await db.drop();
});

function config(otlp: OtlpReceiver, protocol: 'http/json' | 'http/protobuf'): Record<string, unknown> {
  return {
    tracing: {
      traces_endpoint: `${otlp.url}/v1/traces`,
      protocol,
      service_name: 'acw-test',
      headers: { 'x-api-key': 'otlp-key-DDDD4444' },
      resource_attributes: { 'deployment.environment.name': 'test' },
    },
    notify: {
      webhook: {
        circuit: { enabled: false },
        endpoints: [
          {
            name: 'flaky',
            url: `${flaky.url}/hooks?sig=query-secret-CCCC3333`,
            secret: 'endpoint-secret-AAAA1111',
            topics: ['order.paid', 'order.shipped'],
            propagate_trace: true,
            headers: { authorization: 'Bearer header-token-BBBB2222' },
          },
          { name: 'plain', url: plain.url, secret: 'endpoint-secret-EEEE5555', topics: ['order.*'] },
          { name: 'doomed', url: doomed.url, secret: 'endpoint-secret-EEEE5555', topics: ['order.doomed'] },
          { name: 'std', url: std.url, secret: STD_SECRET, scheme: 'standard', topics: ['order.packed'], propagate_trace: true },
        ],
      },
    },
  };
}

const attr = (s: OtlpSpan, k: string) => s.attributes[k];
const byEvent = (spans: OtlpSpan[], eventId: string) =>
  spans.filter((s) => s.kind === CLIENT && attr(s, 'messaging.message.id') === eventId);

function noSecrets(otlp: OtlpReceiver, more: readonly string[]): void {
  const all = otlp.raw.join('\n');
  for (const s of [...SECRETS, ...more]) expect(all, `an export holds ${s.slice(0, 6)}…`).not.toContain(s);
}

describe('tracing to a local OTLP receiver', () => {
  it('http/json: the notify, each attempt, retry, completion and dead letter arrive, linked, with no secret', async () => {
    const otlp = await startOtlpReceiver();
    let api: Api | undefined = await startApi(db, config(otlp, 'http/json'));
    try {
      const token = await makeUser(db.pool, 'producer', 'service');
      const client = createClient({ url: api.url, token, retries: 0 });
      // The client carries the caller's span; the outbox stores it; an HTTP caller sends its own.
      const ev1 = (await context.with(remote(P1.traceId, P1.spanId), () => client.notify('order.paid', { n: 1 }))).event_id;
      const ev2 = await context.with(remote(P2.traceId, P2.spanId), () => notify(db.pool, 'order.shipped', { n: 2 }));
      const ev3 = (
        await call(api.url, 'POST', '/v1/notify', {
          token,
          body: { topic: 'order.doomed', data: {} },
          headers: { traceparent: tp(P3, '01') },
        })
      ).body.event_id as string;
      // A producer not sampled: its attempts are not either, but still hand on their context.
      const ev4 = (
        await call(api.url, 'POST', '/v1/notify', {
          token,
          body: { topic: 'order.paid', data: {} },
          headers: { traceparent: tp(P4, '00') },
        })
      ).body.event_id as string;
      await flaky.waitForRequests(6, 15_000);
      await plain.waitForRequests(4, 15_000);
      await doomed.waitForRequests(3, 15_000);
      await waitFor(
        async () => (await db.pool.query(`select 1 from audit_log where action = 'webhook.dead_letter'`)).rowCount === 1,
        15_000,
      );
      await waitFor(() => api!.events('webhook.attempt').length >= 13, 15_000);
      const attemptLines = api.events('webhook.attempt');
      expect((await call(api.url, 'GET', '/healthz')).status).toBe(200);
      await api.close();
      api = undefined;
      const spans = otlp.spans;
      expect(otlp.contentTypes.every((t) => t === 'application/json')).toBe(true);
      // Health checks make no span; the API's requests do.
      expect(spans.filter((s) => s.kind === SERVER).map((s) => attr(s, 'url.path'))).not.toContain('/healthz');
      expect(spans[0]!.resource).toMatchObject({ 'service.name': 'acw-test', 'deployment.environment.name': 'test' });

      // The client's notify: a server span under the caller's span, a producer span under it.
      const server1 = spans.find((s) => s.kind === SERVER && s.traceId === P1.traceId)!;
      expect(server1).toMatchObject({ parentSpanId: P1.spanId, name: 'POST /v1/notify' });
      expect(server1.attributes).toMatchObject({
        'http.request.method': 'POST',
        'http.route': '/v1/notify',
        'http.response.status_code': 202,
      });
      const producer1 = spans.find((s) => s.kind === PRODUCER && s.parentSpanId === server1.spanId)!;
      expect(producer1.attributes).toMatchObject({
        'messaging.destination.name': 'order.paid',
        'messaging.message.id': ev1,
        'acw.jobs': 2,
      });

      // Its three attempts: each a trace of its own, linked to the producer span.
      const a1 = byEvent(spans, ev1);
      expect(
        a1
          .map((s) => [attr(s, 'acw.endpoint'), attr(s, 'acw.attempt'), attr(s, 'http.response.status_code'), attr(s, 'acw.outcome')])
          .toSorted(),
      ).toEqual([
        ['flaky', 1, 500, 'retry'],
        ['flaky', 2, 200, 'completed'],
        ['plain', 1, 200, 'completed'],
      ]);
      for (const s of a1) {
        expect(s.links).toEqual([{ traceId: P1.traceId, spanId: producer1.spanId }]);
        expect(s.traceId).not.toBe(P1.traceId);
        expect(s.parentSpanId).toBe('');
        expect(s.attributes).toMatchObject({ 'http.request.method': 'POST', 'server.address': '127.0.0.1' });
      }
      const failed = a1.find((s) => attr(s, 'acw.outcome') === 'retry')!;
      expect(failed.status).toBe(2);
      expect(failed.attributes).toMatchObject({ 'error.type': '500', 'url.full': `${flaky.url}/hooks` });

      // The outbox event: the dispatch batch links to the stored context, and so do its attempts.
      const dispatch = spans.find((s) => s.kind === CONSUMER && s.links.some((l) => l.spanId === P2.spanId))!;
      expect(dispatch.attributes).toMatchObject({ 'messaging.operation.type': 'receive', 'acw.jobs': 2 });
      const a2 = byEvent(spans, ev2);
      expect(a2).toHaveLength(3);
      for (const s of a2) expect(s.links).toEqual([P2]);

      // The dead one: three attempts, the last one dead, and the dead letter linked to the notify.
      const producer3 = spans.find((s) => s.kind === PRODUCER && s.traceId === P3.traceId)!;
      const a3 = byEvent(spans, ev3).filter((s) => attr(s, 'acw.endpoint') === 'doomed');
      expect(a3.map((s) => attr(s, 'acw.outcome')).toSorted()).toEqual(['dead', 'retry', 'retry']);
      const dead = spans.find((s) => s.name === 'dead letter')!;
      expect(dead.links).toEqual([{ traceId: P3.traceId, spanId: producer3.spanId }]);

      // Not sampled at the producer: no attempt exported; the receiver still got a context, unsampled.
      expect(byEvent(spans, ev4)).toEqual([]);
      expect(spans.some((s) => s.traceId === P4.traceId)).toBe(false);
      expect(spans.some((s) => s.name === 'claim jobs' && Number(attr(s, 'acw.jobs')) >= 1)).toBe(true);

      // The endpoint with propagate_trace got each attempt's own context; the others none.
      const flakySpans = spans.filter((s) => s.kind === CLIENT && attr(s, 'acw.endpoint') === 'flaky');
      const sent = flaky.requests.map((r) => String(r.headers['traceparent']));
      expect(sent.filter((t) => t.endsWith('-01')).toSorted()).toEqual(flakySpans.map((s) => `00-${s.traceId}-${s.spanId}-01`).toSorted());
      expect(sent.filter((t) => /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/.test(t))).toHaveLength(2);
      expect([...plain.requests, ...doomed.requests].filter((r) => r.headers['traceparent'] !== undefined)).toEqual([]);

      // Each attempt's log line carries its span's ids.
      const ids = new Set(spans.filter((s) => s.kind === CLIENT).map((s) => `${s.traceId}/${s.spanId}`));
      const sampledLines = attemptLines.filter((l) => l['event_id'] !== ev4);
      expect(sampledLines.length).toBeGreaterThanOrEqual(10);
      for (const l of sampledLines) expect(ids.has(`${String(l['trace_id'])}/${String(l['span_id'])}`)).toBe(true);

      const signatures = [...flaky.requests, ...plain.requests, ...doomed.requests].map((r) => String(r.headers['x-acw-signature']));
      noSecrets(otlp, [token, ...signatures]);
    } finally {
      await api?.close();
      await otlp.close();
    }
  });

  it("a batch notify: a producer span per event under the batch span, each event's attempts linked to its own", async () => {
    const otlp = await startOtlpReceiver();
    let api: Api | undefined = await startApi(db, config(otlp, 'http/json'));
    try {
      const token = await makeUser(db.pool, 'producer', 'service');
      const before = plain.requests.length;
      const topics = ['order.one', 'order.shipped', 'order.two'];
      const res = await call(api.url, 'POST', '/v1/notify/batch', {
        token,
        body: { events: topics.map((topic, n) => ({ topic, data: { n } })) },
        headers: { traceparent: tp(P4, '01') },
      });
      expect(res.status).toBe(202);
      const ids = (res.body.results as Array<{ event_id: string }>).map((e) => e.event_id);
      // Refused inside its transaction: nothing written, each event's span says so.
      const refused = await call(api.url, 'POST', '/v1/notify/batch', {
        token,
        body: { events: [{ topic: 'misc.three', data: {}, recipients: ['nobody'] }] },
        headers: { traceparent: tp(P1, '01') },
      });
      expect(refused.status).toBe(400);
      await plain.waitForRequests(before + 3, 15_000);
      // order.shipped goes to flaky too, which takes its second attempt.
      await waitFor(() => api!.events('webhook.attempt').length >= 5, 15_000);
      await api.close();
      api = undefined;
      const spans = otlp.spans;
      const server = spans.find((s) => s.kind === SERVER && s.traceId === P4.traceId)!;
      expect(server.attributes['http.route']).toBe('/v1/notify/batch');
      const batch = spans.find((s) => s.kind === PRODUCER && s.parentSpanId === server.spanId)!;
      expect(batch.name).toBe('send');
      expect(batch.attributes).toMatchObject({ 'messaging.batch.message_count': 3, 'acw.jobs': 4 });
      expect(batch.attributes['messaging.message.id']).toBeUndefined();
      const perEvent = spans.filter((s) => s.kind === PRODUCER && s.parentSpanId === batch.spanId);
      expect(
        perEvent.map((s) => [s.name, attr(s, 'messaging.destination.name'), attr(s, 'messaging.message.id'), attr(s, 'acw.jobs')]),
      ).toEqual(
        expect.arrayContaining([
          ['send order.one', 'order.one', ids[0], 1],
          ['send order.shipped', 'order.shipped', ids[1], 2],
          ['send order.two', 'order.two', ids[2], 1],
        ]),
      );
      expect(perEvent).toHaveLength(3);
      const stored = await db.pool.query<{ id: string; traceparent: string }>(`select id, traceparent from event_log where id = any($1)`, [
        ids,
      ]);
      for (const [i, id] of ids.entries()) {
        const own = perEvent.find((s) => attr(s, 'messaging.message.id') === id)!;
        expect(own.traceId).toBe(P4.traceId);
        expect(stored.rows.find((r) => r.id === id)!.traceparent).toBe(`00-${P4.traceId}-${own.spanId}-01`);
        const attempts = byEvent(spans, id);
        expect(attempts).toHaveLength(i === 1 ? 3 : 1);
        for (const a of attempts) expect(a.links).toEqual([{ traceId: P4.traceId, spanId: own.spanId }]);
      }
      const refusedServer = spans.find(
        (s) => s.kind === SERVER && s.traceId === P1.traceId && attr(s, 'http.route') === '/v1/notify/batch',
      )!;
      const refusedBatch = spans.find((s) => s.kind === PRODUCER && s.parentSpanId === refusedServer.spanId)!;
      const refusedEvent = spans.filter((s) => s.parentSpanId === refusedBatch.spanId);
      expect(refusedEvent.map((s) => [s.name, s.status, attr(s, 'messaging.message.id')])).toEqual([['send misc.three', 2, undefined]]);
      noSecrets(otlp, [token]);
    } finally {
      await api?.close();
      await otlp.close();
    }
  });

  it('http/protobuf: the same spans arrive, read from the wire format; Standard Webhooks carries the context; no link dropped', async () => {
    const otlp = await startOtlpReceiver();
    let api: Api | undefined = await startApi(db, config(otlp, 'http/protobuf'));
    try {
      const token = await makeUser(db.pool, 'producer', 'service');
      const before = plain.requests.length;
      const res = await call(api.url, 'POST', '/v1/notify', {
        token,
        body: { topic: 'order.packed', data: {} },
        headers: { traceparent: `00-${P3.traceId}-${P1.spanId}-01`, tracestate: 'vendor=abc' },
      });
      expect(res.status).toBe(202);
      // One outbox batch of 150 events: more links than the SDK's default limit of 128.
      await context.with(remote(P2.traceId, P2.spanId), () =>
        notifyMany(
          db.pool,
          Array.from({ length: 150 }, (_, i) => ({ topic: 'misc.bulk', data: i })),
        ),
      );
      await plain.waitForRequests(before + 1, 15_000);
      const [stdReq] = await std.waitForRequests(1, 15_000);
      await waitFor(() => api!.events('webhook.attempt').length >= 2, 15_000);
      await waitFor(
        async () =>
          (await db.pool.query(`select count(*)::int as n from event_log where topic = 'misc.bulk' and dispatched_at is not null`)).rows[0]
            .n === 150,
        15_000,
      );
      await api.close();
      api = undefined;
      expect(otlp.contentTypes.every((t) => t === 'application/x-protobuf')).toBe(true);
      const spans = otlp.spans;
      const server = spans.find((s) => s.kind === SERVER && s.traceId === P3.traceId)!;
      expect(server.parentSpanId).toBe(P1.spanId);
      const producer = spans.find((s) => s.kind === PRODUCER && s.parentSpanId === server.spanId)!;
      expect(producer.attributes).toMatchObject({ 'messaging.message.id': res.body.event_id, 'acw.jobs': 2 });
      const attempt = byEvent(spans, res.body.event_id as string).find((s) => attr(s, 'acw.endpoint') === 'plain');
      expect(attempt!.links).toEqual([{ traceId: P3.traceId, spanId: producer.spanId }]);
      expect(attempt!.attributes).toMatchObject({
        'acw.endpoint': 'plain',
        'acw.outcome': 'completed',
        'http.response.status_code': 200,
        'acw.attempt': 1,
      });
      expect(attempt!.resource['service.name']).toBe('acw-test');
      const stdSpan = spans.find((s) => s.kind === CLIENT && attr(s, 'acw.endpoint') === 'std')!;
      expect(stdReq!.headers['webhook-signature']).toBeDefined();
      expect(stdReq!.headers['traceparent']).toBe(`00-${stdSpan.traceId}-${stdSpan.spanId}-01`);
      expect(stdReq!.headers['tracestate']).toBe('vendor=abc');
      const bulk = spans.filter((s) => s.kind === CONSUMER && s.links.some((l) => l.spanId === P2.spanId));
      expect(bulk.reduce((n, s) => n + s.links.length, 0)).toBe(150);
      expect(Math.max(...bulk.map((s) => s.links.length))).toBeGreaterThan(128);
      // The stored context kept the caller's tracestate.
      expect((await db.pool.query(`select tracestate from event_log where id = $1`, [res.body.event_id])).rows[0].tracestate).toBe(
        'vendor=abc',
      );
      noSecrets(otlp, [token]);
    } finally {
      await api?.close();
      await otlp.close();
    }
  });
});
