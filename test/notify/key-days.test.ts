import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify } from '../../src/outbox.js';
import { purgeOld } from '../../src/runners/purge.js';
import { createTestDatabase, V7_AT, type TestDatabase } from '../helpers/db.js';

// Idempotency keys by day (docs/operations.md#retention): a key claimed on an earlier day still
// answers its event while its day is kept, and is free again once its day is past
// notify.idempotency_retention and dropped.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

const YEAR = 365 * 86_400_000;

describe('idempotency keys by day', () => {
  it('a key of yesterday answers its event; once its day is dropped the key makes a new one', async () => {
    // An event of yesterday holding the key, claimed yesterday.
    const old = (
      await db.pool.query<{ id: string }>(
        `insert into event_log (id, topic, data, principal, idempotency_key, dispatched_at, created_at)
         select ${V7_AT('t')}, 'a.b', '{}', 'outbox', 'invoice-7-paid', t, t from (select now() - interval '1 day' as t) x returning id`,
      )
    ).rows[0]!.id;
    await db.pool.query(
      `insert into event_keys (principal, idempotency_key, day, event_id) values ('outbox', 'invoice-7-paid', current_date - 1, $1)`,
      [old],
    );
    expect(await notify(db.pool, 'a.b', { again: 1 }, { idempotencyKey: 'invoice-7-paid' })).toBe(old);
    const keyed = async (k: string) =>
      (await db.pool.query<{ n: number }>(`select count(*)::int as n from event_keys where idempotency_key = $1`, [k])).rows[0]!.n;
    expect(await keyed('invoice-7-paid')).toBe(1);

    // The key's day past a retention of a minute: dropped whole, nothing else of the day.
    const counts = await purgeOld(db.pool, {
      completedRetentionMs: YEAR,
      deadRetentionMs: YEAR,
      idempotencyRetentionMs: 60_000,
      batchSize: 100,
    });
    expect(counts.idempotency_keys).toBe(1);
    expect(counts.events).toBe(0);
    expect(await keyed('invoice-7-paid')).toBe(0);
    const fresh = await notify(db.pool, 'a.b', { again: 2 }, { idempotencyKey: 'invoice-7-paid' });
    expect(fresh).not.toBe(old);
    expect(await notify(db.pool, 'a.b', { again: 3 }, { idempotencyKey: 'invoice-7-paid' })).toBe(fresh);
    // Today's keys stay: the retention is from the end of their day.
    expect(await keyed('invoice-7-paid')).toBe(1);
  });
});
