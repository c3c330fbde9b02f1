// acw-webhooks/client as a service uses it, against the real server: each method, what it resolves
// with (the server's `warning` and `skipped` included), and its types as a consumer sees them,
// checked by tsc (`npm run typecheck`): they are the route schemas' own (src/http/contract/), so a
// change to an answer's schema changes them, and an assertion below fails to compile.
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { createClient, type AcwClient, type NotifyEvent, type NotifyResult } from '../../src/client.js';
import { makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let acw: AcwClient;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  // No process running jobs: the server warns that the jobs wait.
  api = await startApi(db, { jobs: { enabled: false }, notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['orders.*'] } } });
  acw = createClient({ url: api.url, token: await makeUser(db.pool, 'shop', 'service') });
});
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

describe('the client types, as a consumer sees them', () => {
  it('are the answer schema and the request schema', () => {
    expectTypeOf<NotifyResult>().toEqualTypeOf<{
      event_id: string;
      job_ids: string[];
      skipped?: string | undefined;
      replayed: boolean;
      schema_version?: number | undefined;
      warnings?: string[] | undefined;
      warning?: string | undefined;
    }>();
    expectTypeOf<Awaited<ReturnType<AcwClient['notify']>>>().toEqualTypeOf<NotifyResult>();
    expectTypeOf<Awaited<ReturnType<AcwClient['notifyBatch']>>>().toEqualTypeOf<NotifyResult[]>();
    expectTypeOf<{ topic: string; data: unknown }>().toExtend<NotifyEvent>();
    expectTypeOf<{ topic: string; data: unknown; recipients: string[]; idempotencyKey: string }>().toExtend<NotifyEvent>();
    // The wire's snake_case key is not the client's.
    expectTypeOf<NotifyEvent>().not.toHaveProperty('idempotency_key');
  });
});

describe('against the real server', () => {
  it('notify: the event, its jobs, the warning that no worker runs; skipped when no endpoint takes the topic', async () => {
    const sent = await acw.notify('orders.paid', { order: 7 }, { idempotencyKey: 'order-7-paid' });
    expect(sent).toEqual({
      event_id: expect.any(String),
      job_ids: [expect.any(String)],
      replayed: false,
      warning: expect.stringContaining('no worker has been seen'),
    });
    const again = await acw.notify('orders.paid', { order: 7 }, { idempotencyKey: 'order-7-paid' });
    expect(again).toEqual({ ...sent, replayed: true });
    const none = await acw.notify('invoices.sent', null);
    expect(none).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint', replayed: false });
  });

  it('notifyBatch: one result per event, in order, each with the batch warning and its own skipped', async () => {
    const results = await acw.notifyBatch([
      { topic: 'orders.shipped', data: { order: 8 } },
      { topic: 'invoices.sent', data: { invoice: 9 } },
    ]);
    expect(results).toEqual([
      { event_id: expect.any(String), job_ids: [expect.any(String)], replayed: false, warning: expect.any(String) },
      { event_id: expect.any(String), job_ids: [], skipped: 'no_matching_endpoint', replayed: false, warning: expect.any(String) },
    ]);
  });
});
