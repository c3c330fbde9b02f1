// Killed connections: pg_terminate_backend on the LISTEN connections, on the pools' connections,
// and on both, again and again while events are written and delivered by a serve and a worker.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import {
  checkOutcome,
  endpointOf,
  killStarted,
  outboxEvents,
  report,
  runningJobs,
  scaled,
  listening,
  sleep,
  startChaosReceiver,
  startService,
  terminate,
  workDir,
  writeConfig,
  type ChaosReceiver,
} from './harness.js';

const ROUNDS: string[][] = [['acw-webhooks-listener'], ['acw-webhooks'], ['acw-webhooks-listener', 'acw-webhooks']];

let db: TestDatabase;
let rx: ChaosReceiver;
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startChaosReceiver('hooks', () => ({ delayMs: 20 }));
});
afterAll(async () => {
  await killStarted();
  await rx.close();
  await db.drop();
  work.remove();
});

it('killed connections, repeated: the LISTEN connections and the pools recover, every event is delivered', async () => {
  const t0 = Date.now();
  const n = scaled(2000, 200);
  const kills = scaled(12, 6);
  const cfg = writeConfig(work.dir, 'connections.yaml', [endpointOf(rx)], {});
  const serve = await startService('serve', cfg, db.url);
  const worker = await startService('worker', cfg, db.url);
  // One LISTEN connection per process, every wake-up channel on it.
  await waitFor(async () => (await listening(db.pool)) === 2, 30_000, 50);
  const listeners = await listening(db.pool);

  // Events arrive in small commits throughout, so dispatches and deliveries meet every kill.
  const accepted: string[] = [];
  const per = Math.ceil(n / kills);
  let inFlightAtKills = 0;
  let terminated = 0;
  for (let k = 0; k < kills; k++) {
    accepted.push(...(await outboxEvents(db.pool, Math.min(per, n - accepted.length), `round-${k}`, 25)));
    await sleep(150);
    // In flight at the kill: running just before it or just after it, a slight over-count.
    inFlightAtKills += await runningJobs(db.pool);
    terminated += await terminate(db.pool, ROUNDS[k % ROUNDS.length]!);
    inFlightAtKills += await runningJobs(db.pool);
    await sleep(250);
  }
  // The LISTEN connections of both processes back by themselves.
  await waitFor(async () => (await listening(db.pool)) === listeners, 30_000, 50);
  const out = await checkOutcome({ pool: db.pool, accepted, endpoints: [{ receiver: rx }], maxDuplicates: inFlightAtKills });
  expect(await serve.stop()).toBe(0);
  expect(await worker.stop()).toBe(0);
  report('killed connections', t0, {
    events: n,
    kill_rounds: kills,
    connections_terminated: terminated,
    in_flight_at_kills: inFlightAtKills,
    ...out,
  });
});
