import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notifyBatchNow } from '../../src/notify/notify.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

const batch = (ks: string[]) => ks.map((k) => ({ topic: 'a.b', data: { k }, idempotency_key: k }));

describe('batch notify', () => {
  it('concurrent batches sharing idempotency keys in different orders neither deadlock nor duplicate', async () => {
    const { svc } = await startTestService(db, { jobs: { enabled: false }, notify: { webhook: { url: 'http://127.0.0.1:9/x', secret: 's', topics: ['*'] } } });
    try {
      const keys = Array.from({ length: 20 }, (_, i) => `k-${i}`);
      const runs = await Promise.all(
        Array.from({ length: 6 }, (_, i) => notifyBatchNow(svc.db.pool, batch(i % 2 ? keys.toReversed() : keys), 'svc', svc.fanOutContext)),
      );
      expect(runs.every((r) => r.length === 20)).toBe(true);
      expect((await db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(20);
      expect((await db.pool.query('select count(*)::int as n from jobs')).rows[0].n).toBe(20);
      // Answers keep the input order whatever order the keys were taken in.
      expect(runs[1]!.map((a) => (a.body.event_id === runs[0]![19 - runs[1]!.indexOf(a)]!.body.event_id))).toEqual(Array(20).fill(true));
    } finally {
      await svc.stop();
    }
  });
});
