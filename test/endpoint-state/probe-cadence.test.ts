// The probe cadence and the circuit's alerts over a long outage on defaults, on a fake clock
// shared by the process and the database (test/helpers/fake-clock.ts). The receiver is a stub:
// each probe fails until it "returns".
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
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

describe('probe cadence', () => {
  // About 1,300 fake seconds, each a step of a few queries: its run time is the machine's load, not
  // the clock under test (30 s, the default, was not enough on a loaded CI machine).
  it(
    'probes a down endpoint at 10 s, 20 s, then every 30 s however long it is down, and closes within 30 s of its return',
    { timeout: 180_000 },
    async () => {
      const d = await drive(db, clocked, 'down');
      try {
        // Ten refused deliveries open the circuit.
        await d.feed(d.config.notify.webhook.circuit.failure_threshold, refused('down', false));
        expect(await d.circuit()).toBe('open');
        const opened = Date.now();

        // Twenty minutes down.
        while (Date.now() - opened < 20 * 60_000) await d.step();
        const back = Date.now() + 7_000;
        while (Date.now() < back) await d.step();
        d.up.value = true;
        while ((await d.circuit()) !== 'closed') await d.step();
        const closed = Date.now();
        while (d.alerts.length < 2) await d.step();

        const gaps = d.probes.map((t, i) => (t - (i === 0 ? opened : d.probes[i - 1]!)) / 1_000);
        // Each gap is measured in whole steps of one second; a probe may land one step late, and
        // the step it is seen in one more (a full run on two cores once measured 21.99 s).
        expect(gaps[0]).toBeGreaterThanOrEqual(10);
        expect(gaps[0]).toBeLessThanOrEqual(12);
        expect(gaps[1]).toBeGreaterThanOrEqual(20);
        expect(gaps[1]).toBeLessThanOrEqual(22);
        for (const g of gaps.slice(2)) {
          expect(g).toBeGreaterThanOrEqual(30);
          expect(g).toBeLessThanOrEqual(32);
        }
        expect(d.probes.length).toBeGreaterThanOrEqual(40);
        // The first probe after its return closes the circuit.
        expect(d.probes.filter((t) => t >= back)).toHaveLength(1);
        expect((closed - back) / 1_000).toBeLessThanOrEqual(31);

        // One alert 30 s after it opened (alert_after), resolved 30 s after it closed (resolve_after).
        const [open, close] = d.alerts;
        expect(d.alerts.map((a) => a.action)).toEqual(['endpoint.circuit_opened', 'endpoint.circuit_closed']);
        expect((open!.at - opened) / 1_000).toBeGreaterThanOrEqual(30);
        expect((open!.at - opened) / 1_000).toBeLessThanOrEqual(31);
        expect((close!.at - closed) / 1_000).toBeGreaterThanOrEqual(30);
        expect((close!.at - closed) / 1_000).toBeLessThanOrEqual(31);
        expect(close!.details).toMatchObject({ open_alert_id: open!.id, flaps: 0 });
        // The downtime is the database's (fake) time from the first open to the close.
        expect(Math.abs(Number(close!.details.downtime_ms) - (closed - opened))).toBeLessThanOrEqual(1_000);
        // Every due job but the probes, which ran, was held when it closed.
        expect(close!.details.held_deliveries).toBe(80 - d.probes.length);
        const st = await db.pool.query(`select resolved_by from alert_state where alert_id = $1`, [open!.id]);
        expect(st.rows).toEqual([{ resolved_by: String(close!.id) }]);
      } finally {
        await d.stop();
      }
    },
  );
});
