import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { notify, notifyMany, OutboxError, type OutboxEvent } from '../../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// notifyMany is one set-based call of acw_notify_many (migration 0003) per batch. These pin down that
// it answers exactly as notify() called once per event in order would.

let db: TestDatabase;
let c: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase();
  c = new pg.Client({ connectionString: db.url });
  await c.connect();
});
afterAll(async () => {
  await c.end();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('truncate event_log, event_keys cascade');
});

async function count(table = 'events'): Promise<number> {
  return (await db.pool.query(`select count(*)::int as n from ${table}`)).rows[0].n;
}

interface EventRow {
  id: string;
  topic: string;
  data: unknown;
  recipients: string[];
  principal: string;
  idempotency_key: string | null;
  dispatched_at: Date | null;
}

async function rowsById(): Promise<Map<string, EventRow>> {
  const { rows } = await db.pool.query<EventRow>(
    'select id, topic, data, recipients, principal, idempotency_key, dispatched_at from events',
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** A listener on a schema's events channel, counting NOTIFYs. */
async function listen(schema = 'public'): Promise<{ count: () => Promise<number>; end: () => Promise<void> }> {
  const l = new pg.Client({ connectionString: db.url });
  await l.connect();
  let n = 0;
  l.on('notification', () => n++);
  await l.query(`listen "${schema}.acw_events"`);
  return {
    // A NOTIFY is delivered at its sender's commit, before the commit returns: one round trip on the
    // listener afterwards has seen it arrive if it was sent.
    count: async () => {
      await l.query('select 1');
      return n;
    },
    end: () => l.end(),
  };
}

/** Ten keyed events `k-0`..`k-9`, their data tagged. */
function batch(tag: string): OutboxEvent[] {
  return Array.from({ length: 10 }, (_, i) => ({ topic: 'a.b', data: { tag, i }, idempotencyKey: `k-${i}` }));
}

/** One keyed batch in a transaction of its own, on a pool connection. */
async function run(ks: string[], tag: string): Promise<string[]> {
  const client = await db.pool.connect();
  try {
    await client.query('begin');
    const ids = await notifyMany(
      client,
      ks.map((k) => ({ topic: 'a.b', data: { tag, k }, idempotencyKey: k })),
    );
    await client.query('commit');
    return ids;
  } catch (err) {
    await client.query('rollback');
    throw err;
  } finally {
    client.release();
  }
}

describe('notifyMany, set-based', () => {
  it('answers ids in input order, each row holding its own event, with what notify() would write', async () => {
    const datas: unknown[] = [
      'plain',
      '{"looks":"like json"}',
      'null',
      0,
      1.5,
      true,
      false,
      null,
      [],
      {},
      [null, { a: [1, 'x'] }],
      { s: 'é "q" \\ \n' },
    ];
    const events: OutboxEvent[] = Array.from({ length: 1500 }, (_, i) => ({
      topic: `t.n${i % 7}`,
      data: i < datas.length ? datas[i] : { i },
      ...(i % 3 === 0 ? { recipients: [`u${i}`, 'ops'] } : {}),
      ...(i % 5 === 0 ? { idempotencyKey: `key-${1500 - i}` } : {}),
    }));
    await c.query('begin');
    const ids = await notifyMany(c, events);
    await c.query('commit');
    expect(ids).toHaveLength(1500);
    expect(new Set(ids).size).toBe(1500);
    const rows = await rowsById();
    expect(rows.size).toBe(1500);
    ids.forEach((id, i) => {
      const e = events[i]!;
      expect(rows.get(id)).toEqual({
        id,
        topic: e.topic,
        data: e.data,
        recipients: e.recipients ?? [],
        principal: 'outbox',
        idempotency_key: e.idempotencyKey ?? null,
        dispatched_at: null,
      });
    });
    // The very row notify() writes for the same event, but for its id.
    const single = await notify(c, 't.single', { i: 1 }, { recipients: ['ops'], idempotencyKey: 'single' });
    const [many] = await notifyMany(c, [{ topic: 't.single', data: { i: 1 }, recipients: ['ops'], idempotencyKey: 'single-many' }]);
    const all = await rowsById();
    expect({ ...all.get(many!), id: '', idempotency_key: '' }).toEqual({ ...all.get(single), id: '', idempotency_key: '' });
  });

  it('a key given twice in a batch answers both with the first occurrence, whatever the key order', async () => {
    const ids = await notifyMany(c, [
      { topic: 'a.b', data: 0 },
      { topic: 'a.b', data: 1, idempotencyKey: 'zz' },
      { topic: 'a.b', data: 2, idempotencyKey: 'aa' },
      { topic: 'a.b', data: 3, idempotencyKey: 'zz' },
      { topic: 'a.b', data: 4 },
      { topic: 'a.b', data: 5, idempotencyKey: 'aa' },
      { topic: 'a.b', data: 6, idempotencyKey: 'zz' },
    ]);
    expect(ids[3]).toBe(ids[1]);
    expect(ids[6]).toBe(ids[1]);
    expect(ids[5]).toBe(ids[2]);
    expect(new Set(ids).size).toBe(4);
    const rows = await rowsById();
    expect(rows.size).toBe(4);
    expect([ids[0], ids[1], ids[2], ids[4]].map((id) => rows.get(id!)?.data)).toEqual([0, 1, 2, 4]);
  });

  it('replaying a batch answers the first ids and writes nothing, also for keys taken by notify()', async () => {
    const earlier = await notify(c, 'a.b', { n: 'earlier' }, { idempotencyKey: 'k-3' });
    const first = await notifyMany(c, batch('first'));
    expect(first[3]).toBe(earlier);
    expect(await count()).toBe(10);
    const replay = await notifyMany(c, batch('replay').toReversed());
    expect(replay).toEqual(first.toReversed());
    // A replay mixed with new events: only the new ones are written.
    const mixed = await notifyMany(c, [
      { topic: 'a.b', data: 'new', idempotencyKey: 'k-new' },
      { topic: 'a.b', data: 'again', idempotencyKey: 'k-7' },
      { topic: 'a.b', data: 'keyless' },
    ]);
    expect(mixed[1]).toBe(first[7]);
    expect(await count()).toBe(12);
    const rows = await rowsById();
    expect(rows.get(first[0]!)?.data).toEqual({ tag: 'first', i: 0 });
    expect(rows.get(earlier)?.data).toEqual({ n: 'earlier' });
    expect(rows.get(mixed[0]!)?.data).toBe('new');
    // The outbox's keys are its own namespace: another principal's key is not a replay.
    const other = (await db.pool.query(`select acw_notify('a.b', '1', '{}', 'k-shared', 'svc') as id`)).rows[0].id;
    const [mine, taken] = await notifyMany(c, [
      { topic: 'a.b', data: 2, idempotencyKey: 'k-shared' },
      { topic: 'a.b', data: 3, idempotencyKey: 'k-0' },
    ]);
    expect(mine).not.toBe(other);
    expect(taken).toBe(first[0]);
    expect((await rowsById()).get(mine!)?.principal).toBe('outbox');
    expect(await count()).toBe(14);
  });

  it('sends one NOTIFY per batch, at commit, and none for a batch rolled back, which leaves nothing', async () => {
    const l = await listen();
    try {
      const events = Array.from({ length: 50 }, (_, i) => ({ topic: 'a.b', data: i, idempotencyKey: `r-${i}` }));
      await c.query('begin');
      await notifyMany(c, events);
      expect(await l.count()).toBe(0);
      await c.query('rollback');
      expect(await l.count()).toBe(0);
      expect(await count()).toBe(0);

      // The keys of a rolled-back batch are free again.
      const ids = await notifyMany(c, events);
      expect(await count()).toBe(50);
      expect(await l.count()).toBe(1);
      await notifyMany(c, events.slice(0, 3));
      expect(await l.count()).toBe(2);

      // The function runs once per batch; acw_notify (and with it a pg_notify per event) not at all.
      // (PostgreSQL folds a transaction's identical NOTIFYs into one, so the listener alone cannot tell.)
      const superuser = (await c.query('select rolsuper from pg_roles where rolname = current_user')).rows[0].rolsuper;
      await c.query('begin');
      if (superuser) await c.query(`set local track_functions = 'pl'`);
      await notifyMany(c, [...events, { topic: 'a.b', data: 'x' }]);
      await notifyMany(c, [{ topic: 'a.b', data: 'y' }]);
      const tracked = await c.query(
        `select funcname, calls::int from pg_stat_xact_user_functions where funcname like 'acw_notify%' order by 1`,
      );
      await c.query('commit');
      // Only a superuser may turn tracking on (a DATABASE_URL may not be one): then nothing to check.
      const once = [{ funcname: 'acw_notify_many', calls: 2 }];
      expect(superuser ? tracked.rows : once).toEqual(once);
      expect(await l.count()).toBe(3);
      expect(ids).toHaveLength(50);
      expect(await count()).toBe(52);
    } finally {
      await l.end();
    }
  });

  it('bad input is refused naming events[i].field before any SQL, leaving the transaction usable', async () => {
    await c.query('begin');
    await notifyMany(c, [{ topic: 'a.b', data: 'kept' }]);
    const good = { topic: 'a.b', data: 1 };
    await expect(notifyMany(c, [good, good, { topic: 'a.b', data: { s: 'nul\u0000' } }])).rejects.toThrow(/^events\[2\]\.data: .*NUL/);
    await expect(notifyMany(c, [good, { topic: 'a.b', data: 1, recipients: ['no spaces'] }])).rejects.toThrow(
      /^events\[1\]\.recipients\.0: /,
    );
    await expect(notifyMany(c, [{ topic: 'a.b', data: 1, idempotencyKey: 'a b' }])).rejects.toThrow(/^events\[0\]\.idempotency_key: /);
    await expect(notifyMany(c, [good, { topic: 'a.b', data: undefined }])).rejects.toThrow(OutboxError);
    await expect(notifyMany(c, [good], { schema: 'x; drop table events' })).rejects.toThrow(/^schema: /);
    await c.query('commit');
    expect(await count()).toBe(1); // committed: no statement failed in the transaction
  });

  it('acw_notify_many called from SQL checks topics itself and writes nothing for a bad batch', async () => {
    const bad = JSON.stringify([
      { topic: 'a.b', data: 1 },
      { topic: 'a.b', data: 2 },
      { topic: 'Not A Topic', data: 3 },
    ]);
    await expect(db.pool.query('select acw_notify_many($1::jsonb)', [bad])).rejects.toMatchObject({
      code: '22023',
      message: expect.stringMatching(/^events\[2\]\.topic: .*'Not A Topic'/),
    });
    await expect(db.pool.query(`select acw_notify_many('[{"data": 1}]')`)).rejects.toThrow(/events\[0\]\.topic: .* null/);
    await expect(db.pool.query(`select acw_notify_many('{"topic": "a.b"}')`)).rejects.toThrow(/events: expected a JSON array/);
    expect(await count()).toBe(0);
    expect((await db.pool.query(`select acw_notify_many('[]') as ids`)).rows[0].ids).toEqual([]);
    const ok = await db.pool.query(`select acw_notify_many('[{"topic": "a.b", "data": null}, {"topic": "a.c"}]', 'svc') as ids`);
    expect(ok.rows[0].ids).toHaveLength(2);
    expect((await db.pool.query(`select principal, data from events order by topic`)).rows).toEqual([
      { principal: 'svc', data: null },
      { principal: 'svc', data: null },
    ]);
  });

  it('concurrent batches sharing keys in opposite orders neither deadlock nor duplicate', async () => {
    const keys = Array.from({ length: 300 }, (_, i) => `c-${String(i).padStart(3, '0')}`);
    for (let round = 0; round < 3; round++) {
      await db.pool.query('truncate event_log, event_keys');
      const [up, down] = await Promise.all([run(keys, 'up'), run(keys.toReversed(), 'down')]);
      // The batch that waited answers with the winner's ids, in its own input order.
      expect(down).toEqual(up.toReversed());
      expect(await count()).toBe(300);
    }
  });

  it('writes into, and wakes, the schema acw-webhooks is installed in', async () => {
    await migrate(db.pool, { schema: 'acw_many' });
    const l = await listen('acw_many');
    const lp = await listen('public');
    try {
      const ids = await notifyMany(
        c,
        [
          { topic: 'a.b', data: { in: 'schema' }, idempotencyKey: 'same' },
          { topic: 'a.c', data: 2 },
        ],
        { schema: 'acw_many' },
      );
      const again = await notifyMany(c, [{ topic: 'a.b', data: 3, idempotencyKey: 'same' }], { schema: 'acw_many' });
      expect(again).toEqual([ids[0]]);
      const { rows } = await db.pool.query('select id, data, principal from acw_many.events order by topic');
      expect(rows).toEqual([
        { id: ids[0], data: { in: 'schema' }, principal: 'outbox' },
        { id: ids[1], data: 2, principal: 'outbox' },
      ]);
      expect(await count()).toBe(0);
      expect(await l.count()).toBe(2);
      expect(await lp.count()).toBe(0);
      // The key lives in that schema's table only.
      const [pub] = await notifyMany(c, [{ topic: 'a.b', data: 4, idempotencyKey: 'same' }]);
      expect(pub).not.toBe(ids[0]);
    } finally {
      await l.end();
      await lp.end();
    }
  });
});
