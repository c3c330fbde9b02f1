import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

// With nothing set, tracing is off and costs nothing: no module of the OpenTelemetry SDK or its
// exporters is loaded while the service starts, takes a notify over HTTP and delivers it
// (docs/operations.md#tracing). Its packages are CommonJS, so what this process loaded of them is
// in require's cache. `@opentelemetry/api` alone is loaded either way: prom-client imports it.
const loaded = (): string[] => {
  const names = Object.keys(createRequire(import.meta.url).cache)
    .map((p) => /node_modules\/(@opentelemetry\/[^/]+)\//.exec(p)?.[1])
    .filter((n): n is string => n !== undefined && n !== '@opentelemetry/api');
  return [...new Set(names)].toSorted();
};

let db: TestDatabase;
let rx: Receiver;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  await db.drop();
});

describe('tracing off', () => {
  it('loads no OpenTelemetry module, sends no traceparent; an endpoint set loads the SDK', async () => {
    expect(loaded()).toEqual([]);
    let api: Api | undefined = await startApi(db, {
      notify: { webhook: { url: rx.url, secret: 's3cret-value', topics: ['*'], propagate_trace: true } },
    });
    try {
      const token = await makeUser(db.pool, 'producer', 'service');
      const res = await call(api.url, 'POST', '/v1/notify', {
        token,
        body: { topic: 'order.paid', data: { n: 1 } },
        headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      });
      expect(res.status).toBe(202);
      const [req] = await rx.waitForRequests(1);
      expect(req!.headers['traceparent']).toBeUndefined();
      // Nothing of the request's trace is kept either.
      expect((await db.pool.query(`select traceparent from event_log`)).rows).toEqual([{ traceparent: null }]);
      expect(loaded()).toEqual([]);
      await api.close();
      api = undefined;

      // The same with an endpoint configured: the SDK and the exporter of the protocol are loaded.
      api = await startApi(db, { tracing: { traces_endpoint: 'http://127.0.0.1:9/v1/traces', protocol: 'http/json' } });
      expect(loaded()).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-http']));
      expect(loaded()).not.toContain('@opentelemetry/exporter-trace-otlp-proto');
    } finally {
      await api?.close();
    }
  });
});
