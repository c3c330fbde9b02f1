import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify, notifyMany } from '../../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The outbox functions carry the producer's trace context into the event (docs/operations.md#tracing):
// acw_notify's options object, acw_notify_many's items. The calls without them are unchanged.

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const traceOf = async (id: string) =>
  (await db.pool.query(`select traceparent, tracestate from event_log where id = $1`, [id])).rows[0] as {
    traceparent: string | null;
    tracestate: string | null;
  };

describe('trace context in the outbox functions', () => {
  it('acw_notify: five positional arguments as before, the context in p_options, unknown keys ignored', async () => {
    const old = (await db.pool.query(`select acw_notify('a.b', '1', '{}', null, 'svc') as id`)).rows[0].id as string;
    expect(await traceOf(old)).toEqual({ traceparent: null, tracestate: null });
    const four = (await db.pool.query(`select acw_notify('a.b', '1', '{}', 'k-1') as id`)).rows[0].id as string;
    expect(await traceOf(four)).toEqual({ traceparent: null, tracestate: null });
    const opts = JSON.stringify({ traceparent: TP, tracestate: 'v=1', ordering_key: 'x' });
    const id = (await db.pool.query(`select acw_notify('a.b', '1', '{}', null, 'svc', $1::jsonb) as id`, [opts])).rows[0].id as string;
    expect(await traceOf(id)).toEqual({ traceparent: TP, tracestate: 'v=1' });
  });

  it('refuses a malformed traceparent or a tracestate alone, naming the field and writing nothing', async () => {
    const before = (await db.pool.query(`select count(*)::int as n from event_log`)).rows[0].n as number;
    const bad = [
      [{ traceparent: TP.toUpperCase() }, /options\.traceparent: expected a W3C traceparent/],
      [{ traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` }, /options\.traceparent/],
      [{ traceparent: `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01` }, /options\.traceparent/],
      [{ tracestate: 'v=1' }, /options\.tracestate/],
    ] as const;
    for (const [opts, err] of bad)
      await expect(db.pool.query(`select acw_notify('a.b', '1', '{}', null, 'svc', $1::jsonb)`, [JSON.stringify(opts)])).rejects.toThrow(
        err,
      );
    await expect(
      db.pool.query(`select acw_notify_many($1::jsonb)`, [JSON.stringify([{ topic: 'a.b' }, { topic: 'a.b', traceparent: 'junk' }])]),
    ).rejects.toThrow(/events\[1\]\.traceparent/);
    expect((await db.pool.query(`select count(*)::int as n from event_log`)).rows[0].n).toBe(before);
  });

  it('acw_notify_many stores each item its own context', async () => {
    const other = '00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00';
    const res = await db.pool.query(`select acw_notify_many($1::jsonb) as ids`, [
      JSON.stringify([{ topic: 'a.b', traceparent: TP, tracestate: 's=2' }, { topic: 'a.c' }, { topic: 'a.d', traceparent: other }]),
    ]);
    const [a, b, c] = res.rows[0].ids as string[];
    expect(await traceOf(a!)).toEqual({ traceparent: TP, tracestate: 's=2' });
    expect(await traceOf(b!)).toEqual({ traceparent: null, tracestate: null });
    expect(await traceOf(c!)).toEqual({ traceparent: other, tracestate: null });
  });

  it('notify(db, …) with no span active stores no context and calls the function as before', async () => {
    const id = await notify(db.pool, 'a.b', { n: 1 });
    expect(await traceOf(id)).toEqual({ traceparent: null, tracestate: null });
    const [m] = await notifyMany(db.pool, [{ topic: 'a.b', data: 1 }]);
    expect(await traceOf(m!)).toEqual({ traceparent: null, tracestate: null });
  });
});
