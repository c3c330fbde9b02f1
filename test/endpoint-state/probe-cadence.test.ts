// The probe cadence of a long outage on defaults, on a fake clock (docs/operations.md#circuit-breaker):
// the breaker's real statements on real PostgreSQL, whose now() reads the test's clock (a now() of
// our own ahead of pg_catalog on the search_path), and the process's tick on vitest's fake timers
// set to the same time. The receiver is a stub: each probe fails until it "returns".
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveEndpoints, type Endpoint } from '../../src/config/index.js';
import type { ListenHub } from '../../src/db/listen-hub.js';
import { EndpointStates } from '../../src/endpoint-state/endpoint-states.js';
import { silentLogger } from '../../src/log.js';
import { enqueueJobs } from '../../src/queue/transitions.js';
import type { ClaimedJob, JobOutcome } from '../../src/queue/types.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testConfig } from '../helpers/service.js';

let db: TestDatabase;
/** A pool whose now() is the fake clock's. */
let clocked: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`create schema fake_clock;
    create table fake_clock.t (now timestamptz not null); insert into fake_clock.t values (now());
    create function fake_clock.now() returns timestamptz language sql stable as 'select now from fake_clock.t'`);
  clocked = new pg.Pool({ connectionString: db.url, max: 4, options: '-c search_path=public,fake_clock,pg_catalog' });
});
afterAll(async () => {
  await clocked.end();
  await db.drop();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Only what EndpointStates needs of a LISTEN connection: it re-reads every second without one. */
const noListen = { subscribe: async () => ({ close: async () => undefined }) } as unknown as ListenHub;

const refused = (probe: boolean): JobOutcome => ({
  kind: 'retry',
  error: 'connect ECONNREFUSED',
  attempt: {
    attempt: 1,
    endpoint: 'down',
    statusCode: null,
    errorKind: 'connect',
    error: 'ECONNREFUSED',
    durationMs: 1,
    responseBody: null,
    probe,
  },
});
const answered: JobOutcome = {
  kind: 'complete',
  attempt: { attempt: 1, endpoint: 'down', statusCode: 200, errorKind: null, error: null, durationMs: 1, responseBody: null, probe: true },
};

describe('probe cadence', () => {
  it('probes a down endpoint at 10 s, 20 s, then every 30 s however long it is down, and closes within 30 s of its return', async () => {
    const config = testConfig(db, {
      notify: { webhook: { endpoints: [{ name: 'down', url: 'http://127.0.0.1:9/down', secret: 'cadence-secret', topics: ['*'] }] } },
    });
    const endpoints = new Map<string, Endpoint>(resolveEndpoints(config).map((e) => [e.name, e]));
    await enqueueJobs(
      db.pool,
      Array.from({ length: 80 }, (_, i) => ({
        type: WEBHOOK_JOB,
        payload: {
          topic: 'down.test',
          body: buildBody({ id: crypto.randomUUID(), topic: 'down.test', occurredAt: new Date(), data: { i } }),
        } satisfies DeliverPayload,
        maxAttempts: 6,
        endpoint: 'down',
      })),
      'public.acw_jobs',
    );
    const start = (await db.pool.query<{ ms: number }>(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0]!.ms + 1_000;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'], now: start });
    const setClock = (ms: number) => clocked.query(`update fake_clock.t set now = to_timestamp($1::float8 / 1000)`, [ms]);
    await setClock(start);

    const probes: number[] = [];
    let up = false;
    let states: EndpointStates;
    const runner = {
      workerId: 'cadence-worker',
      leaseMs: 3_600_000,
      runClaimed: (job: ClaimedJob) => {
        probes.push(Date.now());
        states.observe(job, up ? answered : refused(true));
      },
      wake: () => undefined,
    };
    states = new EndpointStates({
      pool: clocked,
      listenHub: noListen,
      channel: 'public.acw_endpoints',
      alertsChannel: 'public.acw_alerts',
      circuit: config.notify.webhook.circuit,
      endpoints: () => endpoints,
      log: silentLogger,
    });
    const settle = async () => {
      // Zero-delay timers (a flush, the re-read after it) run at the same time as what set them.
      for (let i = 0; i < 4; i++) {
        await vi.advanceTimersByTimeAsync(0);
        await states.settled();
      }
    };
    /** One second on both clocks, the database's first. */
    const step = async () => {
      await setClock(Date.now() + 1_000);
      await vi.advanceTimersByTimeAsync(1_000);
      await settle();
    };
    const circuit = async () =>
      (await db.pool.query<{ circuit: string }>(`select circuit from endpoint_state where endpoint = 'down'`)).rows[0]?.circuit;

    await states.start(runner);
    try {
      // Ten refused deliveries open the circuit.
      const [first] = (await db.pool.query<{ id: string }>(`select id from job_queue where endpoint = 'down' limit 1`)).rows;
      const job = { id: first!.id, type: WEBHOOK_JOB, endpoint: 'down' } as ClaimedJob;
      for (let i = 0; i < config.notify.webhook.circuit.failure_threshold; i++) states.observe(job, refused(false));
      await settle();
      expect(await circuit()).toBe('open');
      const opened = Date.now();

      // Twenty minutes down.
      while (Date.now() - opened < 20 * 60_000) await step();
      const back = Date.now() + 7_000;
      while (Date.now() < back) await step();
      up = true;
      while ((await circuit()) !== 'closed') await step();
      const closed = Date.now();

      const gaps = probes.map((t, i) => (t - (i === 0 ? opened : probes[i - 1]!)) / 1_000);
      // Each gap is measured in whole steps of one second.
      expect(gaps[0]).toBeGreaterThanOrEqual(10);
      expect(gaps[0]).toBeLessThanOrEqual(11);
      expect(gaps[1]).toBeGreaterThanOrEqual(20);
      expect(gaps[1]).toBeLessThanOrEqual(21);
      for (const g of gaps.slice(2)) {
        expect(g).toBeGreaterThanOrEqual(30);
        expect(g).toBeLessThanOrEqual(31);
      }
      expect(probes.length).toBeGreaterThanOrEqual(40);
      // The first probe after its return closes the circuit.
      expect(probes.filter((t) => t >= back)).toHaveLength(1);
      expect((closed - back) / 1_000).toBeLessThanOrEqual(31);
    } finally {
      vi.useRealTimers();
      await states.stop();
    }
  });
});
