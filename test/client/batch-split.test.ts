import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcwError, createClient, MAX_BATCH_EVENTS, type NotifyClient, type NotifyEvent, type NotifyResult } from '../../src/client.js';
import { MAX_BATCH } from '../../src/notify/input.js';
import { createTestClient } from '../../src/testing.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { makeUser, startApi, type Api } from '../helpers/api.js';

// notifyBatch over the server's limit: split into requests of at most MAX_BATCH, sent in order, and
// on a failure an error that says what was committed. Against a real service, and the in-memory
// test client beside it giving the same answers.

let db: TestDatabase;
let api: Api;
let token: string;
/** Events per request, as the service received them (the client's fetch, counted on the way). */
let requests: number[] = [];
let client: NotifyClient;

/** The client's fetch, counting each batch request's events on the way to the real service. */
const counting: typeof fetch = async (url, init) => {
  const { events } = JSON.parse(String(init?.body)) as { events?: unknown[] };
  if (events) requests.push(events.length);
  return fetch(url, init);
};

beforeAll(async () => {
  db = await createTestDatabase();
  // No endpoint: every event is answered skipped, like a test client with jobsPerEvent 0.
  api = await startApi(db, { server: { max_body: '4mb' } });
  token = await makeUser(db.pool, 'billing', 'service');
  client = createClient({ url: api.url, token, retries: 0, fetch: counting });
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

const batch = (prefix: string, n: number): NotifyEvent[] =>
  Array.from({ length: n }, (_, i) => ({ topic: 'orders.paid', data: { i }, idempotencyKey: `${prefix}-${i}` }));

/** The events with keys `prefix-*`, grouped by the transaction that wrote them (one per request). */
async function written(prefix: string): Promise<{ byKey: Map<string, string>; perTransaction: number[] }> {
  const { rows } = await db.pool.query<{ id: string; idempotency_key: string; tx: string }>(
    `select id, idempotency_key, xmin::text as tx from event_log where idempotency_key like $1 order by xmin::text::bigint`,
    [`${prefix}-%`],
  );
  const counts = new Map<string, number>();
  for (const r of rows) counts.set(r.tx, (counts.get(r.tx) ?? 0) + 1);
  return { byKey: new Map(rows.map((r) => [r.idempotency_key, r.id])), perTransaction: [...counts.values()] };
}

async function caught(p: Promise<unknown>): Promise<AcwError> {
  const err = await p.then(
    () => new Error('expected a refusal'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AcwError);
  return err as AcwError;
}

describe('notifyBatch over the batch limit, against a real service', () => {
  it('the client limit is the server limit', () => {
    expect(MAX_BATCH_EVENTS).toBe(MAX_BATCH);
  });

  it('sends 2,500 events as 3 requests of at most 1,000, in order, and answers them in input order', async () => {
    requests = [];
    const events = batch('s', 2500);
    const res = await client.notifyBatch(events);
    expect(requests).toEqual([1000, 1000, 500]);
    expect(res).toHaveLength(2500);
    const { byKey, perTransaction } = await written('s');
    expect(perTransaction).toEqual([1000, 1000, 500]);
    expect(res.map((r) => r.event_id)).toEqual(events.map((e) => byKey.get(e.idempotencyKey!)));
    expect(res.every((r) => !r.replayed)).toBe(true);
  }, 60_000);

  it('a refused middle request: the first is reported committed, the rest not; the corrected call replays the first and writes the rest once', async () => {
    await client.notify('orders.paid', { other: true }, { idempotencyKey: 'f-1500' });
    requests = [];
    const events = batch('f', 2500);
    const err = await caught(client.notifyBatch(events));
    expect(requests).toEqual([1000, 1000]);
    expect(err).toMatchObject({
      status: 409,
      code: 'idempotency_conflict',
      details: { field: 'events[1500].idempotency_key', fields: ['events[1500].idempotency_key'] },
      batch: { failed: { start: 1000, end: 2000 }, notSent: { start: 2000, end: 2500 } },
    });
    expect(err.message).toContain('events[1500].idempotency_key');
    const committed = err.batch!.results;
    expect(committed).toHaveLength(1000);
    let db1 = await written('f');
    expect(committed.map((r) => r.event_id)).toEqual(events.slice(0, 1000).map((e) => db1.byKey.get(e.idempotencyKey!)));
    expect(db1.byKey.size).toBe(1001); // the first request, and the earlier f-1500

    requests = [];
    events[1500] = { ...events[1500]!, data: { other: true } };
    const res = await client.notifyBatch(events);
    expect(requests).toEqual([1000, 1000, 500]);
    expect(res.slice(0, 1000)).toEqual(committed.map((r) => ({ ...r, replayed: true })));
    expect(res.slice(1000).filter((r) => r.replayed)).toEqual([res[1500]]);
    db1 = await written('f');
    expect(db1.byKey.size).toBe(2500);
    expect(res.map((r) => r.event_id)).toEqual(events.map((e) => db1.byKey.get(e.idempotencyKey!)));
  }, 60_000);
});

/** The same calls on either client, reduced to what both must agree on (event ids as first-seen ordinals). */
async function script(c: NotifyClient): Promise<unknown[]> {
  const ids = new Map<string, number>();
  const shape = (r: NotifyResult) => {
    if (!ids.has(r.event_id)) ids.set(r.event_id, ids.size);
    return [ids.get(r.event_id), r.replayed, r.skipped];
  };
  const out: unknown[] = [];
  const events = batch('p', 2100);
  out.push(shape(await c.notify('orders.paid', { other: true }, { idempotencyKey: 'p-1200' })));
  const err = await caught(c.notifyBatch(events));
  out.push({
    status: err.status,
    code: err.code,
    details: err.details,
    results: err.batch?.results.map(shape),
    failed: err.batch?.failed,
    notSent: err.batch?.notSent,
  });
  // Bad input in the last request: the two before it commit (the first replays).
  const bad = [...events.slice(0, 2000), { topic: 'Not A Topic', data: 1, idempotencyKey: 'p-x' }];
  bad[1200] = { ...bad[1200]!, data: { other: true } };
  const err2 = await caught(c.notifyBatch(bad));
  out.push({
    status: err2.status,
    code: err2.code,
    field: (err2.details as { field?: unknown } | undefined)?.field,
    results: err2.batch?.results.map(shape),
    failed: err2.batch?.failed,
    notSent: err2.batch?.notSent,
  });
  events[1200] = bad[1200]!;
  out.push((await c.notifyBatch(events)).map(shape));
  return out;
}

describe('createTestClient', () => {
  it('splits, refuses and resumes as the real service does', async () => {
    const real = await script(client);
    expect(real[1]).toMatchObject({ status: 409, failed: { start: 1000, end: 2000 }, notSent: { start: 2000, end: 2100 } });
    expect(real[2]).toMatchObject({ status: 400, field: 'events[2000].topic', failed: { start: 2000, end: 2001 } });
    expect(await script(createTestClient({ jobsPerEvent: 0 }))).toEqual(real);
  }, 60_000);
});
