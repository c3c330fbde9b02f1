import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

// An endpoint's circuit opens with keyed backlogs waiting, then closes (docs/operations.md#ordered-delivery):
// its probes are heads (nothing behind a head is ever due), and each key resumes in order.

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let down = true;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver(() => (down ? { status: 503 } : { status: 200 }));
  api = await startApi(db, {
    jobs: { max_attempts: 50, retry: { base: '10ms', max: '50ms', jitter: 0 } },
    notify: {
      webhook: {
        url: rx.url,
        secret: 's3cret',
        topics: ['order.*'],
        circuit: { failure_threshold: 3, min_attempts: 1000, cooldown: '50ms', cooldown_max: '100ms' },
      },
    },
  });
}, 30_000);
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

describe('ordered delivery through an open circuit', () => {
  it('holds every key while open and resumes each in order once closed', async () => {
    const token = await makeUser(db.pool, 'billing', 'service');
    const events = [];
    for (let n = 0; n < 5; n++) for (const k of ['a', 'b', 'c']) events.push({ topic: 'order.x', data: { n }, ordering_key: k });
    expect((await call(api.url, 'POST', '/v1/notify/batch', { token, body: { events } })).status).toBe(202);
    await waitFor(
      async () => (await db.pool.query(`select circuit from endpoint_state where endpoint = 'default'`)).rows[0]?.circuit === 'open',
    );
    // Held: one head per key in job_queue, the rest behind it.
    const held = await db.pool.query(
      `select ordering_key, count(*) filter (where status <> 'behind')::int as heads, count(*)::int as n from job_queue group by 1 order by 1`,
    );
    expect(held.rows).toEqual(['a', 'b', 'c'].map((k) => ({ ordering_key: k, heads: 1, n: 5 })));
    down = false;
    await waitFor(async () => (await db.pool.query(`select count(*)::int as n from job_queue`)).rows[0].n === 0, 20_000);
    expect((await db.pool.query(`select circuit from endpoint_state where endpoint = 'default'`)).rows[0].circuit).toBe('closed');
    for (const k of ['a', 'b', 'c']) {
      const firsts: number[] = [];
      const seen = new Set<string>();
      for (const r of rx.requests.filter((q) => q.headers['x-acw-ordering-key'] === k)) {
        const id = String(r.headers['x-acw-event-id']);
        if (!seen.has(id)) firsts.push(Number(r.headers['x-acw-sequence']));
        seen.add(id);
      }
      expect({ k, firsts }).toEqual({ k, firsts: [1, 2, 3, 4, 5] });
    }
  }, 40_000);
});
