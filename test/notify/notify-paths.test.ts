import { getJob } from '../../src/admin/jobs.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newEventId } from '../../src/notify/event-id.js';
import { buildBody } from '../../src/webhook/job.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

// The write paths of the service's own notify (src/notify/notify.ts) against real PostgreSQL: one
// keyless event on an API-only serve in one statement, keyless batches in parts, and the body's
// occurred_at made in SQL or in the process, byte for byte what buildBody makes of the stored row.

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let token: string;
/** Statement texts sent on the API's pool while recording, with the connection each went on. */
let sent: Array<{ client: object; text: string }> = [];
let recording = false;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, {
    jobs: { enabled: false },
    notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['order.*', 'boom.*'] } },
  });
  const wrapped = new WeakSet<object>();
  const record = (client: { query: unknown }) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = (client.query as (...args: unknown[]) => unknown).bind(client);
    client.query = (...args: unknown[]) => {
      const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: unknown }).text);
      if (recording) sent.push({ client, text: text.replace(/\s+/g, ' ').trim() });
      return query(...args);
    };
  };
  api.svc.db.pool.on('acquire', record);
});
afterAll(async () => {
  await api.close();
  await rx.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('drop trigger if exists boom on event_log; drop trigger if exists boom on job_queue');
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
  token = await makeUser(db.pool, 'billing', 'service');
});

/** A trigger that fails the insert of any row of `table` whose topic (events) or payload topic (jobs) is boom.x. */
async function boomOn(table: 'event_log' | 'job_queue'): Promise<void> {
  const topic = table === 'event_log' ? 'new.topic' : `new.payload->>'topic'`;
  await db.pool.query(`create or replace function boom() returns trigger language plpgsql as $$
    begin if ${topic} = 'boom.x' then raise exception 'boom'; end if; return new; end $$`);
  await db.pool.query(`create trigger boom before insert on ${table} for each row execute function boom()`);
}

async function during<T>(fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  sent = [];
  recording = true;
  try {
    const result = await fn();
    // On the connection that wrote the events, from its begin (or the insert) to its commit (or the
    // insert): auth, the no-worker warning and the metrics come before or after, or go on others.
    const writer = sent.find((s) => /(insert into|copy) event_log/.test(s.text))?.client;
    const mine = sent.filter((s) => s.client === writer).map((s) => s.text);
    const insert = mine.findIndex((t) => /(insert into|copy) event_log/.test(t));
    const begin = mine.findIndex((t) => /^begin\b/.test(t));
    const commit = mine.findLastIndex((t) => t === 'commit');
    return { result, statements: begin >= 0 && begin < insert ? mine.slice(begin, commit + 1) : mine.slice(insert, insert + 1) };
  } finally {
    recording = false;
  }
}

/**
 * Each job's body as it sends it (job detail shows it: made from the stored event), beside what
 * buildBody makes of its event row (created_at to the millisecond).
 */
async function bodies(): Promise<Array<{ stored: string; rebuilt: string }>> {
  const r = await db.pool.query<{ id: string; job_id: string; topic: string; created_ms: number; payload: object }>(
    `select e.id, j.id as job_id, e.topic, floor(extract(epoch from e.created_at) * 1000)::float8 as created_ms, j.payload
     from events e join jobs j on j.event_id = e.id order by e.created_at, e.id`,
  );
  return Promise.all(
    r.rows.map(async (row) => {
      // The job carries no body of its own: its event has it.
      expect(row.payload).not.toHaveProperty('body');
      const stored = ((await getJob(db.pool, row.job_id))!.payload as { body: string }).body;
      return {
        stored,
        rebuilt: buildBody({ id: row.id, topic: row.topic, occurredAt: new Date(row.created_ms), data: JSON.parse(stored).data }),
      };
    }),
  );
}

const post = (path: string, body: unknown) => call(api.url, 'POST', path, { token, body });

describe('POST /v1/notify on an API-only serve', () => {
  it('writes a keyless event, its job and the NOTIFY in one statement, and the body is the row made into buildBody', async () => {
    const data = { b: 'é\u2028"', a: [1, { z: null }], big: 1.5e300 };
    const { result: res, statements } = await during(() => post('/v1/notify', { topic: 'order.paid', data }));
    expect(res.status).toBe(202);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^with first as \(insert into event_log .*insert into job_queue .*pg_notify/);
    const [{ stored, rebuilt }] = (await bodies()) as [{ stored: string; rebuilt: string }];
    expect(stored).toBe(rebuilt);
    expect(JSON.parse(stored)).toEqual({ event_id: res.body.event_id, topic: 'order.paid', occurred_at: expect.any(String), data });
    // The keys in jsonb's order, as every job of a stored event sends them (docs/receivers.md).
    expect(stored).toContain('"data":{"a":[1,{"z":null}],"b":"é\u2028\\"","big":1.5e+300}');
    const row = await db.pool.query(`select dispatched_at is not null as dispatched, recipients from events`);
    expect(row.rows).toEqual([{ dispatched: true, recipients: [] }]);
    expect(await db.pool.query(`select 1 from event_keys`)).toMatchObject({ rowCount: 0 });
  });

  it('is delivered by a separate worker, woken by the NOTIFY the statement sent', async () => {
    const worker = await startTestService(db, { notify: { webhook: { url: rx.url, secret: 's3cret', topics: ['*'] } } });
    try {
      const before = rx.requests.length;
      const res = await post('/v1/notify', { topic: 'order.paid', data: { n: 1 } });
      await rx.waitForRequests(before + 1);
      const got = rx.requests.at(-1)!;
      expect(got.headers['x-acw-event-id']).toBe(res.body.job_ids[0]);
      expect(got.body.toString()).toBe((await bodies())[0]!.stored);
    } finally {
      await worker.svc.stop();
    }
  });

  it('a topic without endpoints writes the event alone, still in one statement', async () => {
    const { result: res, statements } = await during(() => post('/v1/notify', { topic: 'nobody.listens', data: 1 }));
    expect(res.body).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint' });
    expect(statements).toHaveLength(1);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 1, jobs: 0 });
  });

  it('is atomic: a job insert that fails leaves no event', async () => {
    await boomOn('job_queue');
    const res = await post('/v1/notify', { topic: 'boom.x', data: 1 });
    expect(res.status).toBe(500);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 0, jobs: 0 });
  });

  it('a keyed event is one statement too; a replay or a conflict writes nothing there and is answered by the transaction after it', async () => {
    const body = { topic: 'order.paid', data: { n: 1 }, idempotency_key: 'k' };
    const { result: first, statements } = await during(() => post('/v1/notify', body));
    expect(first.status).toBe(202);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/acw_claim_keys\(.*\) c\)\s+returning id\), ins as/);
    const again = await post('/v1/notify', body);
    expect([again.status, again.body]).toEqual([200, { ...first.body, replayed: true }]);
    const other = await post('/v1/notify', { ...body, data: { n: 2 } });
    expect([other.status, other.body.error.code]).toEqual([409, 'idempotency_conflict']);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 1, jobs: 1 });
    const [{ stored, rebuilt }] = (await bodies()) as [{ stored: string; rebuilt: string }];
    expect(stored).toBe(rebuilt);
    // The answer stored with the key is the one given.
    const row = await db.pool.query(`select response from event_keys`);
    expect(row.rows).toEqual([{ response: { event_id: first.body.event_id, job_ids: first.body.job_ids } }]);
  });

  it('ten concurrent notifies with one key make one event and one job; one is new, the others replay it', async () => {
    const body = { topic: 'order.paid', data: { n: 3 }, idempotency_key: 'race' };
    const all = await Promise.all(Array.from({ length: 10 }, () => post('/v1/notify', body)));
    expect(all.map((r) => r.status).toSorted()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 202]);
    expect(new Set(all.map((r) => r.body.event_id)).size).toBe(1);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 1, jobs: 1 });
  });
});

const events = (n: number, bad = -1) =>
  Array.from({ length: n }, (_, i) => ({ topic: i === bad ? 'boom.x' : 'order.paid', data: { i, s: 'x'.repeat(i % 7) } }));

/** Data with every character COPY's text format escapes, and JSON's own escapes. */
const tricky = (i: number) => ({
  i,
  tab: 'a\tb',
  slash: 'back\\slash \\N \\t',
  lines: 'one\ntwo\r\n',
  quoted: '"q" and \'s\' {a,b}',
  wide: 'é 🎉 \u2028',
  escaped: '\\u0041',
});

describe('POST /v1/notify/batch, keyless, in parts', () => {
  it('1,000 events: at most four parts, each its events then its jobs by COPY, between one begin and one commit', async () => {
    const { result: res, statements } = await during(() => post('/v1/notify/batch', { events: events(1000) }));
    expect(res.status).toBe(202);
    expect(statements.map((t) => t.split(' ').slice(0, 3).join(' '))).toEqual([
      'begin; select (extract(epoch',
      ...Array.from({ length: 4 }, () => ['copy event_log (id,', 'copy job_queue (id,']).flat(),
      'commit',
    ]);
    // The NOTIFY goes with each part's jobs, in the same round trip.
    expect(statements.filter((t) => t.endsWith(`; select pg_notify('${api.svc.channels.jobs}', '')`))).toHaveLength(4);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 1000, jobs: 1000 });
    // In input order, each with its own job.
    const ids = await db.pool.query<{ id: string; i: number }>(`select e.id, (e.data->>'i')::int as i from events e`);
    const byI = new Map(ids.rows.map((r) => [r.i, r.id]));
    expect(res.body.results.map((r: { event_id: string }) => r.event_id)).toEqual(Array.from({ length: 1000 }, (_, i) => byI.get(i)));
    const all = await bodies();
    expect(all.filter((b) => b.stored !== b.rebuilt)).toEqual([]);
  });

  it('COPY writes what the statements write: data of any characters, recipients, dispatched at the same now()', async () => {
    await makeUser(db.pool, 'alice', 'viewer');
    // 49 events go by the prepared statements, 60 by COPY; the same rows come out of both.
    for (const n of [49, 60]) {
      const batch = Array.from({ length: n }, (_, i) => ({
        topic: 'order.paid',
        data: tricky(i),
        ...(i % 10 === 0 ? { recipients: ['alice'] } : {}),
      }));
      const { result: res, statements } = await during(() => post('/v1/notify/batch', { events: batch }));
      expect(res.status).toBe(202);
      expect(statements.find((t) => / event_log /.test(t))).toMatch(n < 50 ? /^insert into event_log/ : /^copy event_log/);
      const rows = await db.pool.query<{ id: string; data: unknown; recipients: string[]; principal: string; same: boolean }>(
        `select id, data, recipients, principal, dispatched_at = created_at as same from event_log where id = any($1::uuid[])`,
        [res.body.results.map((r: { event_id: string }) => r.event_id)],
      );
      const byId = new Map(rows.rows.map((r) => [r.id, r]));
      expect(res.body.results.map((r: { event_id: string }) => byId.get(r.event_id))).toEqual(
        batch.map((e) => ({ id: expect.any(String), data: e.data, recipients: e.recipients ?? [], principal: 'billing', same: true })),
      );
      const all = await bodies();
      expect(all.filter((b) => b.stored !== b.rebuilt)).toEqual([]);
    }
    expect(await rowCounts(db.pool)).toMatchObject({ events: 109, jobs: 109 });
    const inbox = await db.pool.query(`select count(*)::int as n from notifications`);
    expect(inbox.rows[0].n).toBe(5 + 6);
  });

  it('a small batch goes in one part', async () => {
    const { statements } = await during(() => post('/v1/notify/batch', { events: events(10) }));
    expect(statements).toHaveLength(4);
  });

  it('a failure in the third part rolls back the parts before it, and the connection serves the next request', async () => {
    await boomOn('event_log');
    const res = await post('/v1/notify/batch', { events: events(1000, 600) });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain('boom.x');
    expect(await rowCounts(db.pool)).toMatchObject({ events: 0, jobs: 0 });
    // Every pooled connection is clean afterwards: the pool's size in requests, each writing.
    for (let k = 0; k < 12; k++) expect((await post('/v1/notify/batch', { events: events(3) })).status).toBe(202);
    expect(await rowCounts(db.pool)).toMatchObject({ events: 36, jobs: 36 });
  });
});

describe('newEventId', () => {
  it('is a version 7 UUID that sorts by its time', () => {
    const a = newEventId(Date.UTC(2026, 0, 1));
    const b = newEventId(Date.UTC(2026, 0, 1) + 1);
    for (const id of [a, b]) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a < b).toBe(true);
    expect(a.slice(0, 13).replace('-', '')).toBe(Date.UTC(2026, 0, 1).toString(16).padStart(12, '0'));
    expect(new Set(Array.from({ length: 10_000 }, () => newEventId())).size).toBe(10_000);
  });
});
