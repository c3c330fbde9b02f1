// Flap suppression on a fake clock (test/helpers/fake-clock.ts): an endpoint whose circuit opens
// and closes again and again, each time within circuit.resolve_after, raises one opened alert
// (counting the flaps) and, once it stays closed, one closed alert that resolves it.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { readAlert } from '../../src/admin/alerts.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { clockedPool, drive, refused } from '../helpers/fake-clock.js';

let db: TestDatabase;
let clocked: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  clocked = await clockedPool(db);
});
afterAll(async () => {
  await clocked.end();
  await db.drop();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('flap suppression', () => {
  it('an endpoint open about 10 s at a time, five times over, raises one alert 30 s after it first opened, with its flap count', async () => {
    const d = await drive(db, clocked, 'flappy');
    const threshold = d.config.notify.webhook.circuit.failure_threshold;
    try {
      const opened = Date.now();
      let liveFlaps: number | null = null;
      for (let flap = 0; flap < 5; flap++) {
        // Its deliveries fail: open. The first probe, 10 s later, finds it up: closed.
        d.up.value = false;
        await d.feed(threshold, refused('flappy', false));
        expect(await d.circuit()).toBe('open');
        d.up.value = true;
        while ((await d.circuit()) !== 'closed') await d.step();
        // Closed for a few seconds, under resolve_after (30 s), before it fails again.
        for (let i = 0; i < 3; i++) await d.step();
        // After the fourth opening, the alert stands, counting the flaps so far, live.
        const standing = d.alerts.find((a) => a.action === 'endpoint.circuit_opened');
        if (flap === 3 && standing) liveFlaps = (await readAlert(db.pool, standing.id)).flaps;
      }
      expect(liveFlaps).toBe(3);
      const closed = Date.now() - 3_000;
      while (d.alerts.length < 2) await d.step();

      // Never open 30 s in a row, yet alerted 30 s after the outage began.
      expect(d.alerts.map((a) => a.action)).toEqual(['endpoint.circuit_opened', 'endpoint.circuit_closed']);
      const [open, close] = d.alerts;
      expect((open!.at - opened) / 1_000).toBeGreaterThanOrEqual(30);
      expect((open!.at - opened) / 1_000).toBeLessThanOrEqual(31);
      expect(close!.details).toMatchObject({ open_alert_id: open!.id, flaps: 4 });
      expect(Math.abs(Number(close!.details.downtime_ms) - (closed - opened))).toBeLessThanOrEqual(1_000);
      const view = await readAlert(db.pool, open!.id);
      expect(view).toMatchObject({ state: 'resolved', resolved_by: close!.id, flaps: 4 });
      expect(await readAlert(db.pool, close!.id)).toMatchObject({ state: 'resolved', resolved_by: null });
      // One inbox message per alert, not per flap (no admin here: none at all; the audit rows are the count).
      const rows = await db.pool.query(`select count(*)::int as n from audit_log where target_id = 'flappy'`);
      expect(rows.rows[0]).toEqual({ n: 2 });
    } finally {
      await d.stop();
    }
  });
});
