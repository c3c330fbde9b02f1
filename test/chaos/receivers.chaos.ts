// Misbehaving receivers beside a good one: one that hangs, one that answers 500 half the time, one
// that closes the connection mid-response, one that answers after the timeout, one that sends a
// 10 MB body. Each event fans out to all six. The circuit breaker holds the hanging one's jobs
// (docs/operations.md#circuit-breaker) instead of spending their attempts; short cool-downs here.
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

const TIMEOUT_MS = 500;
const MAX_ATTEMPTS = 4;
const THRESHOLD = 10;
/** notify.webhook.max_in_flight's default: what one process can have in flight to the hanging receiver. */
const MAX_IN_FLIGHT = 16;

let db: TestDatabase;
const rx: Record<string, ChaosReceiver> = {};
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  const behaviours = {
    good: () => ({}),
    // Never answers: its circuit opens after the failure threshold, and its jobs are held, pending.
    hang: () => ({ hang: true }),
    // 500 at random half the time, but never on a job's last attempt (so none goes dead).
    flaky: (n: number) => (n < MAX_ATTEMPTS && Math.random() < 0.5 ? { status: 500 } : {}),
    // First request of each job: the connection closes, either before any answer or after a 200
    // head promising more body than comes. The first is retried; the second counts as delivered.
    cut: (n: number, jobId: string) => (n > 1 ? {} : jobId.charCodeAt(jobId.length - 1) % 2 === 0 ? { destroy: true } : { truncate: true }),
    // First request of each job answered only after the sender's timeout.
    // (Long after: a loaded machine can run the sender's timer late, and with the answer already
    // arrived the timer still wins; the second delivery that follows would be a true duplicate.)
    late: (n: number) => (n === 1 ? { delayMs: TIMEOUT_MS * 10 } : {}),
    // A 10 MB body: the sender keeps its first 4 KiB and drops the connection.
    huge: () => ({ bodyBytes: 10 * 1024 * 1024 }),
  };
  for (const [name, b] of Object.entries(behaviours)) rx[name] = await startChaosReceiver(name, b);
});
afterAll(async () => {
  await killStarted();
  await Promise.all(Object.values(rx).map((r) => r.close()));
  await db.drop();
  work.remove();
});

it('misbehaving receivers: the hanging one is held by its circuit (attempts bounded, none dead), the others are all delivered, none taken twice', async () => {
  const t0 = Date.now();
  const n = scaled(40, 10);
  // The short timeout where it is the point; elsewhere a long one, so a loaded machine does not
  // turn a prompt answer into a timeout (and a legitimate second delivery).
  const short = new Set(['hang', 'late']);
  const endpoints = Object.values(rx).map((r) => endpointOf(r, { timeout: short.has(r.name) ? `${TIMEOUT_MS}ms` : '10s' }));
  const cfg = writeConfig(
    work.dir,
    'receivers.yaml',
    endpoints,
    { max_attempts: MAX_ATTEMPTS, retry: { base: '100ms', max: '400ms', jitter: 0 } },
    { circuit: { failure_threshold: THRESHOLD, cooldown: '200ms', cooldown_max: '1s' } },
  );
  const a = await startService('serve', cfg, db.url);
  const accepted = await outboxEvents(db.pool, n, 'receivers');
  const out = await checkOutcome({
    pool: db.pool,
    accepted,
    endpoints: Object.values(rx).map((receiver) => ({ receiver, held: receiver.name === 'hang' })),
    // Nothing crashes here: a receiver takes a delivery twice only where the sender timed out
    // waiting for an answer it gave (none, unless the machine stalls for the 10 s timeout).
    maxDuplicates: () =>
      count(db.pool, `select count(*)::int as n from webhook_attempts where endpoint not in ('hang', 'late') and error_kind = 'timeout'`),
  });
  // The hanging receiver cost at most the failure threshold plus what was in flight (besides its
  // probes, which spend no attempt); none of its jobs went dead.
  const hangTries = await count(db.pool, `select count(*)::int as n from webhook_attempts where endpoint = 'hang' and not probe`);
  expect(hangTries).toBeGreaterThanOrEqual(THRESHOLD);
  expect(hangTries).toBeLessThanOrEqual(THRESHOLD + MAX_IN_FLIGHT);
  expect(await count(db.pool, `select count(*)::int as n from jobs where endpoint = 'hang' and status = 'dead'`)).toBe(0);
  expect(await count(db.pool, `select count(*)::int as n from endpoint_state where endpoint = 'hang' and circuit <> 'closed'`)).toBe(1);
  // The late one's first request of each job timed out (a probe among them hands its job back unspent).
  expect(await count(db.pool, `select count(*)::int as n from webhook_attempts where endpoint = 'late' and error_kind = 'timeout'`)).toBe(
    n,
  );
  expect(await count(db.pool, `select count(*)::int as n from jobs where endpoint = 'huge' and attempts = 1`)).toBe(n);
  expect(
    a.lines.filter((l) => l.includes('"level":50') && !l.includes('"job.dead"')),
    'errors logged other than job.dead',
  ).toEqual([]);
  expect(await a.stop()).toBe(0);
  report('misbehaving receivers', t0, { events: n, ...out, hang_attempts: hangTries });
});
