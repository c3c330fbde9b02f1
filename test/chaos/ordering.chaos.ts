// Ordered delivery per key (docs/operations.md#ordered-delivery) through two worker processes and a
// kill -9 of one of them, against a receiver that fails 30% of attempts with a 503 and sometimes
// hangs until the timeout: the loss and duplicate bounds hold, and within each key the first
// deliveries arrive in sequence order.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  checkOutcome,
  count,
  endpointOf,
  killStarted,
  lockedByPrefix,
  report,
  startChaosReceiver,
  startService,
  workDir,
  writeConfig,
  type ChaosReceiver,
} from './harness.js';

const KEYS = 20;
const PER_KEY = 15;

let db: TestDatabase;
let rx: ChaosReceiver;
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  // Seeded, so a failure can be replayed.
  let seed = 29;
  const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  rx = await startChaosReceiver('ordered', () => {
    const x = random();
    return x < 0.3 ? { status: 503 } : x < 0.35 ? { hang: true } : {};
  });
});
afterAll(async () => {
  await killStarted();
  await rx.close();
  await db.drop();
  work.remove();
});

it('kill -9 of one of two workers, a receiver failing 30% and hanging: no loss, bounded duplicates, each key in order', async () => {
  const t0 = Date.now();
  const cfg = writeConfig(
    work.dir,
    'ordering.yaml',
    [endpointOf(rx, { timeout: '1s' })],
    {
      workers: 32,
      max_attempts: 30,
      retry: { base: '20ms', max: '200ms', jitter: 0 },
      job_reaper: { interval: '1s', lease_timeout: '3s' },
    },
    { circuit: { enabled: false } },
  );
  const a = await startService('worker', cfg, db.url);
  const b = await startService('worker', cfg, db.url);
  // Through the outbox, keys interleaved, in batches: each key's order is its position.
  const accepted: string[] = [];
  for (let n = 0; n < PER_KEY; n += 5) {
    const events = [];
    for (let m = n; m < n + 5; m++)
      for (let k = 0; k < KEYS; k++) events.push({ topic: 'chaos.event', data: { k, m }, ordering_key: `key-${k}` });
    const res = await db.pool.query<{ ids: string[] }>('select acw_notify_many($1::jsonb) as ids', [JSON.stringify(events)]);
    accepted.push(...res.rows[0]!.ids);
  }
  await rx.waitForCount(KEYS * 3);
  const inFlight = await count(db.pool, `select count(*)::int as n from jobs where status = 'running' and locked_by like $1`, [
    lockedByPrefix(a),
  ]);
  a.child.kill('SIGKILL');

  const out = await checkOutcome({ pool: db.pool, accepted, endpoints: [{ receiver: rx }], maxDuplicates: inFlight, settleMs: 60_000 });
  const firsts = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const d of rx.deliveries) {
    if (seen.has(d.jobId)) continue;
    seen.add(d.jobId);
    const list = firsts.get(d.orderingKey ?? '?') ?? [];
    list.push(d.sequence ?? -1);
    firsts.set(d.orderingKey ?? '?', list);
  }
  expect(firsts.size).toBe(KEYS);
  const expected = Array.from({ length: PER_KEY }, (_, i) => i + 1);
  for (const [key, seqs] of firsts) expect({ key, seqs }).toEqual({ key, seqs: expected });
  expect(await count(db.pool, `select count(*)::int as n from ordering_keys where head is not null`)).toBe(0);
  expect(await b.stop()).toBe(0);
  report('ordering kill -9', t0, { keys: KEYS, events: KEYS * PER_KEY, in_flight_at_kill: inFlight, ...out });
});
