// PostgreSQL down for 10 s in the middle of 3,000 deliveries, then started again: the workers and
// the LISTEN connections recover by themselves, /readyz goes 503 and back to 200, /healthz stays
// 200 throughout. The scenario runs its own embedded PostgreSQL, so stopping it stops nothing else.
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEmbeddedPostgres, removeSharedCopies } from '../../src/db/embedded.js';
import { binaries, reachableBinaries, runAs } from '../../src/db/embedded-files.js';
import { createPool } from '../../src/db/pool.js';
import { waitFor } from '../helpers/logs.js';
import {
  checkOutcome,
  endpointOf,
  killStarted,
  listening,
  notifyBatchUntilAccepted,
  report,
  restartPostgres,
  runningJobs,
  scaled,
  sleep,
  startChaosReceiver,
  startService,
  stopPostgres,
  workDir,
  writeConfig,
  type ChaosReceiver,
  type ServiceProc,
} from './harness.js';

const OUTAGE_MS = 10_000;
const BATCH = 100;

let dataDir: string;
let port: number;
let url: string;
let pool: pg.Pool;
let rx: ChaosReceiver;
const work = workDir();
beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'acw-chaos-pg-'));
  const handle = await startEmbeddedPostgres(dataDir);
  port = Number(new URL(handle.url).port);
  const admin = new pg.Client({ connectionString: handle.url });
  await admin.connect();
  await admin.query('create database acw_chaos');
  await admin.end();
  const u = new URL(handle.url);
  u.pathname = '/acw_chaos';
  url = u.toString();
  // The test's own pool: it reconnects after the restart like the service's.
  pool = createPool({ url, size: 4, schema: 'public' });
  // A job sent again (after its lease ran out in the outage) is answered slowly, so that the first
  // holder's outcome, retried until the database is back (every 5 s at most), lands while the
  // second holder still runs: it must change nothing (the lease guard), and the record must show
  // that the second delivered it.
  rx = await startChaosReceiver('hooks', (n) => ({ delayMs: n === 1 ? 100 : 12_000 }));
});
afterAll(async () => {
  await killStarted();
  await rx?.close();
  await pool?.end().catch(() => undefined);
  if (dataDir) {
    await stopPostgres(dataDir).catch(() => undefined);
    await removeSharedCopies(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  }
  work.remove();
});

interface Probe {
  at: number;
  proc: string;
  route: '/healthz' | '/readyz';
  status: number | string;
}

/** Poll /healthz and /readyz of each process every 200 ms until stopped. */
function probe(procs: ServiceProc[]): { probes: Probe[]; stop(): Promise<void> } {
  const probes: Probe[] = [];
  const state = { stopped: false };
  const loop = (async () => {
    while (!state.stopped) {
      await Promise.all(
        procs.flatMap((p) =>
          (['/healthz', '/readyz'] as const).map(async (route) => {
            let status: number | string;
            try {
              const res = await fetch(`${p.url}${route}`, { signal: AbortSignal.timeout(15_000) });
              await res.arrayBuffer();
              status = res.status;
            } catch (err) {
              status = (err as Error).name;
            }
            probes.push({ at: Date.now(), proc: p.kind, route, status });
          }),
        ),
      );
      await sleep(200);
    }
  })();
  return {
    probes,
    stop: async () => {
      state.stopped = true;
      await loop;
    },
  };
}

it('PostgreSQL down for 10 s in the middle of the deliveries: everything recovers by itself, nothing is lost', async () => {
  const t0 = Date.now();
  const total = scaled(3000, 300);
  const cfg = writeConfig(work.dir, 'outage.yaml', [endpointOf(rx, { timeout: '30s' })], {
    max_attempts: 10,
    // Shorter than the outage: leases run out while the database is away.
    job_reaper: { interval: '1s', lease_timeout: '4s' },
  });
  // Migrates the new database at start, both at once.
  const [serve, worker] = await Promise.all([startService('serve', cfg, url), startService('worker', cfg, url)]);
  await waitFor(async () => (await listening(pool)) === 2, 30_000, 50);
  const health = probe([serve, worker]);

  // A client sending batches through the API, retrying each with its idempotency keys until accepted.
  const failures: string[] = [];
  const sending = (async () => {
    const ids: string[] = [];
    for (let i = 0; i < total; i += BATCH) {
      const events = Array.from({ length: Math.min(BATCH, total - i) }, (_, k) => ({
        topic: 'chaos.event',
        data: { n: i + k },
        idempotency_key: `outage-${i + k}`,
      }));
      const r = await notifyBatchUntilAccepted(serve.url, events);
      ids.push(...r.ids);
      failures.push(...r.failures);
      // Paced, so that sending goes on through the outage.
      await sleep(100);
    }
    return ids;
  })();

  await rx.waitForCount(Math.floor(total / 3));
  // In flight at the fault: running now, or sent to the receiver from now until the database is
  // back (only a job claimed before the stop can be), a slight over-count.
  const runningBefore = await runningJobs(pool);
  const sentBefore = rx.count;
  // Counted once the API has served requests: serve's token cache listens from its first one.
  const listeners = await listening(pool);
  const downAt = Date.now();
  await stopPostgres(dataDir);
  // Both processes notice: /readyz answers 503.
  await waitFor(
    () =>
      ['serve', 'worker'].every((k) =>
        health.probes.some((p) => p.at > downAt && p.proc === k && p.route === '/readyz' && p.status === 503),
      ),
    30_000,
    50,
  ).catch((err: unknown) => {
    throw new Error(`no 503 from /readyz: serve exit ${serve.child.exitCode}\n${serve.lines.slice(-30).join('\n')}`, { cause: err });
  });
  await sleep(OUTAGE_MS - (Date.now() - downAt));
  const bin = reachableBinaries(await binaries(), runAs());
  await restartPostgres(realpathSync(join(dataDir, 'pg')), port, bin.postgres, runAs());
  const upAt = Date.now();
  const inFlight = runningBefore + rx.count - sentBefore;
  await waitFor(
    () =>
      ['serve', 'worker'].every((k) => health.probes.some((p) => p.at > upAt && p.proc === k && p.route === '/readyz' && p.status === 200)),
    60_000,
    50,
  );
  const readyMs = Date.now() - upAt;
  // The LISTEN connections are back, each listening.
  await waitFor(async () => (await listening(pool)) === listeners, 60_000, 100);
  const listeningMs = Date.now() - upAt;

  const accepted = await sending;
  const sentMs = Date.now() - upAt;
  const out = await checkOutcome({ pool, accepted, endpoints: [{ receiver: rx }], maxDuplicates: inFlight, settleMs: 180_000 });
  await health.stop();
  const healthz = health.probes.filter((p) => p.route === '/healthz');
  expect(
    healthz.filter((p) => p.status !== 200),
    '/healthz answers other than 200',
  ).toEqual([]);
  for (const k of ['serve', 'worker']) {
    const ready = health.probes.filter((p) => p.route === '/readyz' && p.proc === k);
    expect(
      ready.filter((p) => p.at < downAt).every((p) => p.status === 200),
      `${k} /readyz before the outage`,
    ).toBe(true);
    expect(ready.at(-1)?.status, `${k} /readyz at the end`).toBe(200);
  }
  expect(await serve.stop()).toBe(0);
  expect(await worker.stop()).toBe(0);
  report('PostgreSQL down', t0, {
    deliveries: total,
    down_after_ms: downAt - t0,
    outage_ms: upAt - downAt,
    ready_after_restart_ms: readyMs,
    listening_after_restart_ms: listeningMs,
    sent_after_restart_ms: sentMs,
    in_flight: inFlight,
    refused_notify_tries: failures.length,
    healthz_probes: healthz.length,
    ...out,
  });
});
