import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AcwError, createClient } from '../../src/client.js';
import { notify, notifyMany, OutboxError } from '../../src/outbox.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { runCliInProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

// The ordering key on every entry of an event (docs/operations.md#ordered-delivery): 1 to 256
// bytes; empty or longer is refused naming the field, with nothing written. The outbox function
// keeps its positional calls of two to five arguments.

let db: TestDatabase;
let api: Api;
let c: pg.Client;
let token: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db, { notify: { webhook: { url: 'http://127.0.0.1:9/', secret: 's3cret', topics: ['*'] } } }, 'serve', {});
  c = new pg.Client({ connectionString: db.url });
  await c.connect();
  token = await makeUser(db.pool, 'billing', 'service');
}, 30_000);
afterAll(async () => {
  await c?.end();
  await api?.close();
  await db?.drop();
});
beforeEach(async () => {
  // The service's workers keep trying the jobs of the test before (their receiver refuses): a
  // truncate may meet them in a deadlock, and is then simply tried again.
  for (let attempt = 1; ; attempt++) {
    try {
      await db.pool.query('truncate event_log, event_keys, job_queue, job_history, ordering_keys cascade');
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err;
    }
  }
});

/** 257 bytes in 129 characters: over the limit in bytes only. */
const LONG = 'é'.repeat(128) + 'x';
const written = async (): Promise<{ events: number; jobs: number; keys: number }> => {
  const r = await db.pool.query(
    `select (select count(*)::int from event_log) as events, (select count(*)::int from job_queue) as jobs,
            (select count(*)::int from ordering_keys) as keys`,
  );
  return r.rows[0];
};
const NOTHING = { events: 0, jobs: 0, keys: 0 };

describe('ordering_key input', () => {
  it('HTTP: refused when empty or over 256 bytes, naming the field, nothing written; 256 bytes pass', async () => {
    for (const bad of ['', LONG]) {
      const one = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: 1, ordering_key: bad } });
      expect(one.status).toBe(400);
      expect(one.body.error.details.field).toBe('ordering_key');
      const batch = await call(api.url, 'POST', '/v1/notify/batch', {
        token,
        body: {
          events: [
            { topic: 'a.b', data: 1, ordering_key: 'fine' },
            { topic: 'a.b', data: 2, ordering_key: bad },
          ],
        },
      });
      expect(batch.status).toBe(400);
      expect(batch.body.error.details.field).toBe('events[1].ordering_key');
    }
    expect(await written()).toEqual(NOTHING);
    const ok = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: 1, ordering_key: 'é'.repeat(128) } });
    expect(ok.status).toBe(202);
    const job = await db.pool.query(`select ordering_key, ordering_seq, status from job_queue`);
    expect(job.rows).toMatchObject([{ ordering_key: 'é'.repeat(128), ordering_seq: '1' }]);
  });

  it('the client sends it, and refuses nothing the server would take', async () => {
    const client = createClient({ url: api.url, token, retries: 0 });
    await client.notify('a.b', 1, { orderingKey: 'order-1' });
    await client.notifyBatch([
      { topic: 'a.b', data: 2, orderingKey: 'order-1' },
      { topic: 'a.b', data: 3 },
    ]);
    const rows = await db.pool.query(`select ordering_key, ordering_seq from job_queue order by ordering_seq nulls last`);
    expect(rows.rows).toEqual([
      { ordering_key: 'order-1', ordering_seq: '1' },
      { ordering_key: 'order-1', ordering_seq: '2' },
      { ordering_key: null, ordering_seq: null },
    ]);
    const err = await client.notify('a.b', 1, { orderingKey: '' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcwError);
    expect((err as AcwError).status).toBe(400);
  });

  it('the CLI: --ordering-key, refused when empty', async () => {
    const env = { ...process.env, DATABASE_URL: db.url, ACW_NOTIFY_WEBHOOK_URL: 'http://127.0.0.1:9/', ACW_NOTIFY_WEBHOOK_SECRET: 's' };
    const bad = await runCliInProcess(['notify', 'a.b', '--ordering-key', ''], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/ordering_key/);
    expect(await written()).toEqual(NOTHING);
    const good = await runCliInProcess(['notify', 'a.b', '--ordering-key', 'k-1'], env);
    expect(good).toMatchObject({ code: 0 });
    expect((await db.pool.query(`select ordering_key from event_log`)).rows).toEqual([{ ordering_key: 'k-1' }]);
  });

  it('the outbox: refused before anything is sent, and by the SQL functions themselves', async () => {
    await expect(notify(c, 'a.b', 1, { orderingKey: '' })).rejects.toThrow(OutboxError);
    await expect(notify(c, 'a.b', 1, { orderingKey: LONG })).rejects.toThrow(/^ordering_key: /);
    await expect(
      notifyMany(c, [
        { topic: 'a.b', data: 1 },
        { topic: 'a.b', data: 1, orderingKey: '' },
      ]),
    ).rejects.toThrow(/events\[1\]\.ordering_key/);
    // The functions check too (a caller of the SQL alone), naming the field; nothing written.
    for (const [sql, re] of [
      [`select acw_notify('a.b', '1', '{}', null, 'outbox', '{"ordering_key": ""}')`, /^ordering_key: expected 1 to 256 bytes/],
      [`select acw_notify('a.b', '1', '{}', null, 'outbox', '{"ordering_key": 7}')`, /^ordering_key: expected a string/],
      [`select acw_notify('a.b', '1', '{}', null, 'outbox', jsonb_build_object('ordering_key', repeat('é', 129)))`, /ordering_key/],
      [`select acw_notify_many('[{"topic": "a.b"}, {"topic": "a.b", "ordering_key": ""}]')`, /^events\[1\]\.ordering_key: /],
    ] as const) {
      await expect(db.pool.query(sql)).rejects.toThrow(re);
    }
    expect(await written()).toEqual(NOTHING);
  });

  it('the outbox function keeps its positional calls; unknown options are ignored; the pump keys the jobs', async () => {
    const two = await db.pool.query(`select acw_notify('a.two', '1') as id`);
    const five = await db.pool.query(`select acw_notify('a.five', '2', array['nobody'], 'idem-5', 'app') as id`);
    const six = await db.pool.query(
      `select acw_notify('a.six', '3', '{}', null, 'outbox', '{"ordering_key": "k", "later": true, "other": "00-x"}') as id`,
    );
    const many = await db.pool.query(`select acw_notify_many('[{"topic": "a.many", "ordering_key": "k"}, {"topic": "a.many"}]') as ids`);
    const id = await notify(c, 'a.lib', 4, { orderingKey: 'k' });
    const rows = await db.pool.query(`select id, topic, ordering_key, principal, idempotency_key from event_log order by id`);
    const keyOf = new Map(rows.rows.map((r) => [r.id, r.ordering_key]));
    expect([two, five, six].map((r) => keyOf.get(r.rows[0].id))).toEqual([null, null, 'k']);
    expect([...many.rows[0].ids, id].map((x) => keyOf.get(x))).toEqual(['k', null, 'k']);
    expect(rows.rows.find((r) => r.id === five.rows[0].id)).toMatchObject({ principal: 'app', idempotency_key: 'idem-5' });
    // The outbox pump dispatches them: the keyed events' jobs in their key's order.
    const jobs = await waitFor(async () => {
      const r = await db.pool.query(
        `select payload->>'topic' as topic, ordering_seq, status from job_queue where ordering_key = 'k' order by ordering_seq`,
      );
      return r.rows.length === 3 ? r.rows : null;
    });
    // The head may be claimed already (its receiver, port 9, refuses: it stays the head, retrying).
    expect(jobs.map((j) => [j.topic, j.ordering_seq, j.status === 'behind'])).toEqual([
      ['a.six', '1', false],
      ['a.many', '2', true],
      ['a.lib', '3', true],
    ]);
    // Operators see a job behind its key's head as pending.
    const listed = await call(api.url, 'GET', '/v1/jobs?status=pending', { token: await makeUser(db.pool, 'ops', 'viewer') });
    expect(listed.body.items.filter((j: { topic: string }) => j.topic === 'a.lib')).toHaveLength(1);
  });
});
