// kill -9 of a worker process with its deliveries in flight, a second worker running: the survivor
// rescues and finishes all of them within the lease plus one reaper interval.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import {
  checkOutcome,
  count,
  endpointOf,
  killStarted,
  lockedByPrefix,
  outboxEvents,
  report,
  scaled,
  startChaosReceiver,
  startService,
  workDir,
  writeConfig,
  type ChaosReceiver,
} from './harness.js';

const LEASE_MS = 3_000;
const REAPER_MS = 1_000;

let db: TestDatabase;
// Four receivers on four ports: a process keeps at most 64 connections per origin, and every
// delivery in flight here is a request the receiver holds open.
let rxs: ChaosReceiver[] = [];
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  rxs = await Promise.all(['a', 'b', 'c', 'd'].map((k) => startChaosReceiver(`hooks-${k}`, () => ({ hang: true }))));
});
afterAll(async () => {
  await killStarted();
  await Promise.all(rxs.map((r) => r.close()));
  await db.drop();
  work.remove();
});

it('kill -9 of a worker with its deliveries in flight: the other worker finishes every one within lease + one reaper interval', async () => {
  const t0 = Date.now();
  const events = scaled(50, 5);
  const n = events * rxs.length;
  const cfg = writeConfig(
    work.dir,
    'kill9.yaml',
    rxs.map((rx) => endpointOf(rx, { max_in_flight: events, timeout: '60s' })),
    {
      workers: n + 10,
      job_reaper: { interval: `${REAPER_MS}ms`, lease_timeout: `${LEASE_MS}ms` },
    },
  );
  const a = await startService('worker', cfg, db.url);
  const accepted = await outboxEvents(db.pool, events, 'kill9');
  // Every delivery in flight at A: its receiver holds each request open.
  for (const rx of rxs) await rx.waitForCount(events);
  expect(
    await count(db.pool, `select count(*)::int as n from jobs where status = 'running' and locked_by like $1`, [lockedByPrefix(a)]),
  ).toBe(n);
  const b = await startService('worker', cfg, db.url);

  a.child.kill('SIGKILL');
  const killedAt = Date.now();
  for (const rx of rxs) rx.setBehaviour(() => ({}));
  // A's jobs leave its (expired) leases: the reaper's rescue, which config bounds.
  await waitFor(
    async () => (await count(db.pool, `select count(*)::int as n from jobs where locked_by like $1`, [lockedByPrefix(a)])) === 0,
    60_000,
    50,
  );
  const rescuedMs = Date.now() - killedAt;
  // One second on top of lease + interval for the reaper's own statement and this poll.
  expect(rescuedMs).toBeLessThanOrEqual(LEASE_MS + REAPER_MS + 1_000);

  const out = await checkOutcome({ pool: db.pool, accepted, endpoints: rxs.map((receiver) => ({ receiver })), maxDuplicates: n });
  // B delivered each again (A's requests were never answered), on the job's second attempt.
  expect(await count(db.pool, `select count(*)::int as n from jobs where attempts = 2`)).toBe(n);
  expect(
    b.lines.filter((l) => l.includes('"job.reaped"')).length + a.lines.filter((l) => l.includes('"job.reaped"')).length,
  ).toBeGreaterThan(0);
  expect(await b.stop()).toBe(0);
  report('kill -9', t0, { in_flight: n, rescued_ms: rescuedMs, ...out });
});
