import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { notifyBatchNow } from '../../src/notify/notify.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService } from '../helpers/service.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

const ev = (k: string, data: unknown = { k }) => ({ topic: 'a.b', data, idempotency_key: k });
const count = async (table: string) => (await db.pool.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0]!.n;
const uuid = expect.stringMatching(/^[0-9a-f-]{36}$/);

const batch = (ks: string[]) => ks.map((k) => ({ topic: 'a.b', data: { k }, idempotency_key: k }));

describe('batch notify', () => {
  it('concurrent batches sharing idempotency keys in different orders neither deadlock nor duplicate', async () => {
    const { svc } = await startTestService(db, {
      jobs: { enabled: false },
      notify: { webhook: { url: 'http://127.0.0.1:9/x', secret: 's', topics: ['*'] } },
    });
    try {
      const keys = Array.from({ length: 20 }, (_, i) => `k-${i}`);
      const runs = await Promise.all(
        Array.from({ length: 6 }, (_, i) => notifyBatchNow(svc.db.pool, batch(i % 2 ? keys.toReversed() : keys), 'svc', svc.fanOutContext)),
      );
      expect(runs.every((r) => r.length === 20)).toBe(true);
      expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(20);
      expect((await db.pool.query('select count(*)::int as n from jobs')).rows[0].n).toBe(20);
      // Answers keep the input order whatever order the keys were taken in.
      expect(runs[1]!.map((a) => a.body.event_id === runs[0]![19 - runs[1]!.indexOf(a)]!.body.event_id)).toEqual(Array(20).fill(true));
    } finally {
      await svc.stop();
    }
  });
});

describe('POST /v1/notify/batch, set-based', () => {
  let api: Api;
  let token: string;
  /** Statements sent on the service's pool while counting (BEGIN and COMMIT included). */
  let statements = 0;
  let counting = false;

  beforeAll(async () => {
    api = await startApi(db, {
      jobs: { enabled: false },
      notify: { webhook: { url: 'http://127.0.0.1:9/x', secret: 's', topics: ['*'] } },
    });
    // A wrapper around every pooled client's query: the statements of the request's transaction,
    // from BEGIN to COMMIT (auth's lookup, outside it, may or may not be cached).
    const wrapped = new WeakSet<object>();
    api.svc.db.pool.on('acquire', (client) => {
      if (wrapped.has(client)) return;
      wrapped.add(client);
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      let inTransaction = false;
      (client as { query: unknown }).query = (...args: unknown[]) => {
        const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: unknown }).text);
        if (/^begin\b/i.test(text)) inTransaction = true;
        if (counting && inTransaction) statements++;
        if (/^(commit|rollback)\b/i.test(text)) inTransaction = false;
        return query(...args);
      };
    });
  });
  afterAll(async () => api.close());
  beforeEach(async () => {
    await db.pool.query(
      'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
    );
    token = await makeUser(db.pool, 'billing', 'service');
    await makeUser(db.pool, 'alice', 'viewer');
  });

  const post = (events: unknown[]) => call(api.url, 'POST', '/v1/notify/batch', { token, body: { events } });
  it('1,000 events with 10 replays: each answered in place, the replays with their first answer and nothing written again', async () => {
    const first = await post(Array.from({ length: 10 }, (_, i) => ev(`r-${i}`)));
    expect(first.status).toBe(202);
    const events = Array.from({ length: 1000 }, (_, i) => (i % 100 === 7 ? ev(`r-${(i - 7) / 100}`) : ev(`n-${i}`)));
    const res = await post(events);
    expect(res.status).toBe(202);
    expect(res.body.results).toHaveLength(1000);
    expect(res.body.results).toEqual(
      events.map((_, i) =>
        i % 100 === 7 ? { ...first.body.results[(i - 7) / 100], replayed: true } : { event_id: uuid, job_ids: [uuid], replayed: false },
      ),
    );
    expect(new Set(res.body.results.map((r: { event_id: string }) => r.event_id)).size).toBe(1000);
    expect([await count('events'), await count('jobs')]).toEqual([1000, 1000]);
    // Each new event is stored dispatched, with the answer given for it.
    const stored = await db.pool.query(
      `select k.event_id as id, k.response from event_keys k join events e on e.id = k.event_id
        where k.idempotency_key = 'n-500' and e.dispatched_at is not null`,
    );
    // The stored answer is the first one; `replayed` is added by the route, not stored.
    const { replayed: _replayed, ...storedAnswer } = res.body.results[500];
    expect(stored.rows).toEqual([{ id: res.body.results[500].event_id, response: storedAnswer }]);
    // All replays: 200, the first answers.
    const again = await post(events);
    expect(again.status).toBe(200);
    // With jobs off here, both answers also carry the no-worker warning (docs/operations.md#processes).
    expect(again.body).toEqual({ ...res.body, results: res.body.results.map((r: object) => ({ ...r, replayed: true })) });
  });

  it('the same batch with 1 conflict is refused whole, naming the key, and writes nothing', async () => {
    await post(Array.from({ length: 10 }, (_, i) => ev(`r-${i}`)));
    const before = await rowCounts(db.pool);
    const events = Array.from({ length: 1000 }, (_, i) => (i % 100 === 7 ? ev(`r-${(i - 7) / 100}`) : ev(`n-${i}`)));
    events[307] = ev('r-3', { changed: true });
    const res = await post(events);
    expect(res.status).toBe(409);
    expect(res.body.error).toEqual({
      code: 'idempotency_conflict',
      message: 'events[307].idempotency_key: already used with a different request',
      details: { field: 'events[307].idempotency_key', fields: ['events[307].idempotency_key'] },
    });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('several conflicts: every one is named in details.fields', async () => {
    await post([ev('c-1'), ev('c-2'), ev('c-3')]);
    const before = await rowCounts(db.pool);
    const res = await post([ev('x-0'), ev('c-3', 3), ev('c-1'), ev('c-2', 2), ev('x-1')]);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toBe('events[1].idempotency_key: already used with a different request (and 1 more)');
    expect(res.body.error.details).toEqual({
      field: 'events[1].idempotency_key',
      fields: ['events[1].idempotency_key', 'events[3].idempotency_key'],
    });
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('a key twice in one batch: the later one replays the first, or conflicts with it', async () => {
    const res = await post([ev('d'), ev('e'), ev('d')]);
    expect(res.status).toBe(202);
    expect(res.body.results[2]).toEqual({ ...res.body.results[0], replayed: true });
    expect(await count('events')).toBe(2);
    const bad = await post([ev('f'), ev('f', 2)]);
    expect([bad.status, bad.body.error.details.field]).toEqual([409, 'events[1].idempotency_key']);
    expect(await count('events')).toBe(2);
  });

  it('two concurrent batches sharing 100 keys write each event once', async () => {
    const shared = Array.from({ length: 100 }, (_, i) => ev(`s-${String(i).padStart(3, '0')}`));
    const a = [...Array.from({ length: 400 }, (_, i) => ev(`a-${i}`)), ...shared];
    const b = [...shared.toReversed(), ...Array.from({ length: 400 }, (_, i) => ev(`b-${i}`))];
    const [ra, rb] = await Promise.all([post(a), post(b)]);
    expect([ra.status, rb.status]).toEqual([202, 202]);
    for (let i = 0; i < 100; i++) {
      const [x, y] = [rb.body.results[99 - i], ra.body.results[400 + i]];
      // The same event in both answers: new in the batch that wrote it, a replay in the other.
      expect({ ...x, replayed: null }).toEqual({ ...y, replayed: null });
      expect([x.replayed, y.replayed].toSorted()).toEqual([false, true]);
    }
    expect([await count('events'), await count('jobs')]).toEqual([900, 900]);
    const dup = await db.pool.query(`select idempotency_key from events group by idempotency_key having count(*) > 1`);
    expect(dup.rows).toEqual([]);
  });

  it('the statements per request do not grow with the batch size', async () => {
    await post([ev('old-0'), ev('old-1')]);
    // Every kind of work in each batch: a replay, a recipient, a topic with no job.
    const mixed = (n: number) => [
      ev('old-0'),
      { ...ev(`rcpt-${n}`), recipients: ['alice'] },
      { topic: 'c.d', data: 1 },
      ...Array.from({ length: n - 3 }, (_, i) => ev(`k-${n}-${i}`)),
    ];
    const counts: number[] = [];
    for (const n of [3, 10, 1000]) {
      statements = 0;
      counting = true;
      const res = await post(mixed(n));
      counting = false;
      expect(res.status).toBe(202);
      counts.push(statements);
    }
    expect(counts[2]).toBe(counts[0]);
    expect(counts[1]).toBe(counts[0]);
    // begin, recipients, keys and events, jobs, notifications, commit
    expect(counts[0]).toBe(6);
    expect(await count('notifications')).toBe(3);
  });
});
