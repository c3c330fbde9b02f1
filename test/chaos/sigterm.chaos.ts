// SIGTERM while deliveries run: those that end within shutdown_grace complete, the rest are
// aborted and handed back with their attempt unspent; the process exits 0 and leaves none running.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  checkOutcome,
  count,
  endpointOf,
  killStarted,
  outboxEvents,
  report,
  scaled,
  startChaosReceiver,
  startService,
  workDir,
  writeConfig,
  type ChaosReceiver,
} from './harness.js';

const GRACE_MS = 3_000;

let db: TestDatabase;
let quick: ChaosReceiver;
let slow: ChaosReceiver;
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  // Quick answers come well inside the grace; slow ones long after it.
  quick = await startChaosReceiver('quick', () => ({ delayMs: 1_000 }));
  slow = await startChaosReceiver('slow', () => ({ delayMs: 60_000 }));
});
afterAll(async () => {
  await killStarted();
  await quick.close();
  await slow.close();
  await db.drop();
  work.remove();
});

it('SIGTERM during long deliveries: finished or handed back within shutdown_grace, none left running', async () => {
  const t0 = Date.now();
  const n = scaled(40, 10);
  const endpoints = [endpointOf(quick, { max_in_flight: n }), endpointOf(slow, { max_in_flight: n, timeout: '120s' })];
  const cfg = writeConfig(work.dir, 'sigterm.yaml', endpoints, { workers: 2 * n, shutdown_grace: `${GRACE_MS}ms` });
  const a = await startService('serve', cfg, db.url);
  const accepted = await outboxEvents(db.pool, n, 'sigterm');
  await slow.waitForCount(n);
  await quick.waitForCount(n);
  const inFlight = await count(db.pool, `select count(*)::int as n from jobs where status = 'running'`);

  const signalled = Date.now();
  a.child.kill('SIGTERM');
  expect(await a.exited).toBe(0);
  const exitedMs = Date.now() - signalled;
  // The grace, the second the worker pool gives aborted handlers to settle, and a second of margin.
  expect(exitedMs).toBeLessThanOrEqual(GRACE_MS + 2_000);
  const timeout = a.lines.find((l) => l.includes('"jobs.module.shutdown_timeout"'));
  expect(timeout, 'the slow deliveries were cut at the grace').toBeDefined();

  // Nothing running: quick ones completed, slow ones pending again with the attempt unspent.
  const rows = (
    await db.pool.query<{ endpoint: string; status: string; attempts: number; n: number }>(
      `select endpoint, status, attempts, count(*)::int as n from jobs group by 1, 2, 3 order by 1`,
    )
  ).rows;
  expect(rows).toEqual([
    { endpoint: 'quick', status: 'completed', attempts: 1, n },
    { endpoint: 'slow', status: 'pending', attempts: 0, n },
  ]);
  // The aborted attempts are on record as such.
  expect(await count(db.pool, `select count(*)::int as n from webhook_attempts where endpoint = 'slow' and aborted`)).toBe(n);

  // A new process delivers what was handed back.
  slow.setBehaviour(() => ({}));
  const b = await startService('serve', cfg, db.url);
  const out = await checkOutcome({
    pool: db.pool,
    accepted,
    endpoints: endpoints.map((_, i) => ({ receiver: i === 0 ? quick : slow })),
    maxDuplicates: inFlight,
  });
  expect(await b.stop()).toBe(0);
  report('SIGTERM', t0, { in_flight: inFlight, exited_ms: exitedMs, ...out });
});
