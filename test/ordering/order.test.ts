import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';
import { waitFor } from '../helpers/logs.js';

// Ordered delivery per key (docs/operations.md#ordered-delivery) through two services' worker pools
// on one database, against a receiver that fails 30% of attempts with a 5xx: within each key, the
// first deliveries arrive in sequence order, one at a time.

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let other: Awaited<ReturnType<typeof startTestService>>;
let token: string;

const KEYS = 10;
const PER_KEY = 10;

beforeAll(async () => {
  db = await createTestDatabase();
  // Seeded, so a failure can be replayed.
  let seed = 42;
  const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  rx = await startReceiver(() => (random() < 0.3 ? { status: 503 } : { status: 200 }));
  const config = {
    jobs: { max_attempts: 12, retry: { base: '5ms', max: '40ms', jitter: 0 } },
    notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['order.*'], circuit: { enabled: false } } },
  };
  api = await startApi(db, config);
  other = await startTestService(db, config);
  token = await makeUser(db.pool, 'billing', 'service');
}, 30_000);
afterAll(async () => {
  await api?.close();
  await other?.svc.stop();
  await rx?.close();
  await db?.drop();
});

const header = (r: ReceivedRequest, name: string): string => String(r.headers[name]);

describe('ordered delivery', () => {
  it('delivers each key in order, one at a time, across two worker pools and failing attempts', async () => {
    // Interleaved keys, in batches and single calls, so the two pools and the hand-off both play.
    const events = [];
    for (let n = 0; n < PER_KEY; n++)
      for (let k = 0; k < KEYS; k++) events.push({ topic: 'order.updated', data: { k, n }, ordering_key: `order-${k}` });
    for (let i = 0; i < events.length; i += 30) {
      const res = await call(api.url, 'POST', '/v1/notify/batch', { token, body: { events: events.slice(i, i + 30) } });
      expect(res.status).toBe(202);
    }
    const one = await call(api.url, 'POST', '/v1/notify', {
      token,
      body: { topic: 'order.updated', data: { k: 0, n: PER_KEY }, ordering_key: 'order-0' },
    });
    expect(one.status).toBe(202);
    const total = KEYS * PER_KEY + 1;
    await waitFor(
      async () => new Set(rx.requests.filter((r) => r.headers['x-acw-event-id']).map((r) => header(r, 'x-acw-event-id'))).size >= total,
      20_000,
    );
    await waitFor(async () => (await db.pool.query(`select count(*)::int as n from job_queue`)).rows[0].n === 0, 20_000);

    const firsts = new Map<string, ReceivedRequest>();
    for (const r of rx.requests) {
      const id = header(r, 'x-acw-event-id');
      if (!firsts.has(id)) firsts.set(id, r);
    }
    const byKey = new Map<string, Array<{ seq: number; n: number }>>();
    for (const r of firsts.values()) {
      const key = header(r, 'x-acw-ordering-key');
      const body = JSON.parse(r.body.toString()) as { data: { n: number } };
      const list = byKey.get(key) ?? [];
      list.push({ seq: Number(header(r, 'x-acw-sequence')), n: body.data.n });
      byKey.set(key, list);
    }
    expect(byKey.size).toBe(KEYS);
    for (const [key, list] of byKey) {
      // Sequence numbers 1..n, in arrival order, and in the order the events were accepted.
      expect({ key, seqs: list.map((x) => x.seq), ns: list.map((x) => x.n) }).toEqual({
        key,
        seqs: list.map((_, i) => i + 1),
        ns: list.map((_, i) => i),
      });
    }
    // One at a time per key: no request of a key started while another of the same key was unanswered
    // is hard to see from here; the database says no key ever had two live heads.
    const keys = await db.pool.query(`select count(*)::int as n from ordering_keys where head is not null`);
    expect(keys.rows[0].n).toBe(0);
  }, 60_000);
});
