import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { notify, notifyMany, OutboxError } from '../../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

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

describe('outbox notify()', () => {
  it("notifyMany writes every event in one statement, in order, inside the caller's transaction", async () => {
    await c.query('begin');
    const ids = await notifyMany(c, [
      { topic: 'a.one', data: { n: 1 } },
      { topic: 'a.two', data: [1, 2], recipients: ['alice'] },
      { topic: 'a.three', data: null, idempotencyKey: 'k3' },
    ]);
    expect(ids).toHaveLength(3);
    // Invisible to others until commit.
    expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(0);
    await c.query('commit');
    const rows = (await db.pool.query('select id, topic, data, recipients, idempotency_key, dispatched_at from events')).rows;
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(ids.map((id) => byId.get(id)?.topic)).toEqual(['a.one', 'a.two', 'a.three']);
    expect(byId.get(ids[1])).toMatchObject({ data: [1, 2], recipients: ['alice'], dispatched_at: null });
    expect(byId.get(ids[2])).toMatchObject({ data: null, idempotency_key: 'k3' });
  });

  it('the same idempotency key returns the first event and writes nothing', async () => {
    const a = await notify(c, 'a.b', { x: 1 }, { idempotencyKey: 'dup' });
    const b = await notify(c, 'a.b', { x: 1 }, { idempotencyKey: 'dup' });
    expect(b).toBe(a);
    expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(1);
  });

  it("notifyMany: a key used before, or twice in one batch, answers with the first event's id", async () => {
    const before = await notify(c, 'a.b', { n: 0 }, { idempotencyKey: 'old' });
    const ids = await notifyMany(c, [
      { topic: 'a.b', data: 1, idempotencyKey: 'twice' },
      { topic: 'a.b', data: 2 },
      { topic: 'a.b', data: 3, idempotencyKey: 'old' },
      { topic: 'a.b', data: 4, idempotencyKey: 'twice' },
      { topic: 'a.b', data: 5 },
    ]);
    expect(ids).toHaveLength(5);
    expect(ids[2]).toBe(before);
    expect(ids[3]).toBe(ids[0]);
    expect(new Set([ids[0], ids[1], ids[4], before]).size).toBe(4);
    expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(4);
    const data = (await db.pool.query('select id, data from events')).rows;
    expect(data.find((r) => r.id === ids[0]).data).toBe(1);
  });

  it('bad input is refused before anything is sent, naming the field', async () => {
    await expect(notify(c, 'Not A Topic', {})).rejects.toThrow(OutboxError);
    await expect(notify(c, 'Not A Topic', {})).rejects.toThrow(/^topic: /);
    await expect(notify(c, 'a.b', { s: 'nul\u0000' })).rejects.toThrow(/data: .*NUL/);
    await expect(notify(c, 'a.b', undefined)).rejects.toThrow(/data/);
    // Data that serialises to nothing is refused, not a TypeError.
    await expect(notify(c, 'a.b', () => 1)).rejects.toThrow(OutboxError);
    // jsonb refuses a lone surrogate too: refused here, so the caller's transaction is not aborted by it.
    await c.query('begin');
    await expect(notify(c, 'a.b', { s: 'half \ud800 a pair' })).rejects.toThrow(/data: .*lone surrogate/);
    expect(await notify(c, 'a.b', { s: 'still usable' })).toMatch(/^[0-9a-f-]{36}$/);
    await c.query('rollback');
    await expect(
      notifyMany(c, [
        { topic: 'a.b', data: 1 },
        { topic: 'x y', data: 1 },
      ]),
    ).rejects.toThrow(/events\[1\]\.topic/);
    expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(0);
  });

  it('writes into the schema acw-webhooks is installed in', async () => {
    await migrate(db.pool, { schema: 'acw_svc' });
    const id = await notify(c, 'a.b', { in: 'schema' }, { schema: 'acw_svc' });
    expect((await db.pool.query('select data from acw_svc.events where id = $1', [id])).rows[0].data).toEqual({ in: 'schema' });
    await expect(notify(c, 'a.b', {}, { schema: 'x; drop table events' })).rejects.toThrow(/schema/);
  });
});
