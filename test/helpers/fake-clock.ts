// Endpoint state on a fake clock: the breaker's real statements on real PostgreSQL, whose now()
// reads the test's clock (a now() of our own ahead of pg_catalog on the search_path), and the
// process's tick (EndpointStates) on vitest's fake timers set to the same time. Column defaults
// (`default now()`) keep the real clock: read times of rows from the fake one instead.
import pg from 'pg';
import { vi } from 'vitest';
import { resolveEndpoints, type Config, type Endpoint } from '../../src/config/index.js';
import type { ListenHub } from '../../src/db/listen-hub.js';
import { EndpointStates } from '../../src/endpoint-state/endpoint-states.js';
import { silentLogger } from '../../src/log.js';
import { enqueueJobs } from '../../src/queue/transitions.js';
import type { ClaimedJob, JobOutcome } from '../../src/queue/types.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../../src/webhook/job.js';
import type { TestDatabase } from './db.js';
import { testConfig } from './service.js';

/** A pool whose now() is the fake clock's; made once per test database. */
export async function clockedPool(db: TestDatabase): Promise<pg.Pool> {
  await db.pool.query(`create schema if not exists fake_clock;
    create table if not exists fake_clock.t (now timestamptz not null);
    insert into fake_clock.t select now() where not exists (select 1 from fake_clock.t);
    create or replace function fake_clock.now() returns timestamptz language sql stable as 'select now from fake_clock.t'`);
  return new pg.Pool({ connectionString: db.url, max: 4, options: '-c search_path=public,fake_clock,pg_catalog' });
}

/** Only what EndpointStates needs of a LISTEN connection: it re-reads every second without one. */
const noListen = { subscribe: async () => ({ close: async () => undefined }) } as unknown as ListenHub;

export const refused = (endpoint: string, probe: boolean): JobOutcome => ({
  kind: 'retry',
  error: 'connect ECONNREFUSED',
  attempt: {
    attempt: 1,
    endpoint,
    statusCode: null,
    errorKind: 'connect',
    error: 'ECONNREFUSED',
    durationMs: 1,
    responseBody: null,
    probe,
  },
});
export const answered = (endpoint: string, probe: boolean): JobOutcome => ({
  kind: 'complete',
  attempt: { attempt: 1, endpoint, statusCode: 200, errorKind: null, error: null, durationMs: 1, responseBody: null, probe },
});

export interface Driven {
  states: EndpointStates;
  config: Config;
  /** When each probe was claimed (fake clock). */
  probes: number[];
  /** Whether the receiver answers the probes. */
  up: { value: boolean };
  /** Alerts as raised, with the fake time their step saw them first. */
  alerts: Array<{ id: number; action: string; at: number; details: Record<string, unknown> }>;
  /** One second on both clocks (the database's first), then what it set off has run. */
  step(ms?: number): Promise<void>;
  /** Let zero-delay timers (a flush, the re-read after it) run at the present time. */
  settle(): Promise<void>;
  /** Feed `n` outcomes of deliveries (not probes) of the endpoint. */
  feed(n: number, outcome: JobOutcome): Promise<void>;
  circuit(): Promise<string | undefined>;
  stop(): Promise<void>;
}

/**
 * One endpoint `name` with `jobs` due pending deliveries, its EndpointStates started on fake timers
 * at the database's time now. A probe's outcome is `up.value ? answered : refused`.
 */
export async function drive(
  db: TestDatabase,
  clocked: pg.Pool,
  name: string,
  over: Record<string, unknown> = {},
  jobs = 80,
): Promise<Driven> {
  const config = testConfig(db, {
    notify: { webhook: { endpoints: [{ name, url: `http://127.0.0.1:9/${name}`, secret: 'clock-secret', topics: ['*'] }], ...over } },
  });
  const endpoints = new Map<string, Endpoint>(resolveEndpoints(config).map((e) => [e.name, e]));
  await enqueueJobs(
    db.pool,
    Array.from({ length: jobs }, (_, i) => ({
      type: WEBHOOK_JOB,
      payload: {
        topic: 'clock.test',
        body: buildBody({ id: crypto.randomUUID(), topic: 'clock.test', occurredAt: new Date(), data: { i } }),
      } satisfies DeliverPayload,
      maxAttempts: 6,
      endpoint: name,
    })),
    'public.acw_jobs',
  );
  const start = (await db.pool.query<{ ms: number }>(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0]!.ms + 1_000;
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'], now: start });
  const setClock = (ms: number) => clocked.query(`update fake_clock.t set now = to_timestamp($1::float8 / 1000)`, [ms]);
  await setClock(start);

  const probes: number[] = [];
  const up = { value: false };
  const alerts: Driven['alerts'] = [];
  const states: EndpointStates = new EndpointStates({
    pool: clocked,
    listenHub: noListen,
    channel: 'public.acw_endpoints',
    alertsChannel: 'public.acw_alerts',
    circuit: config.notify.webhook.circuit,
    endpoints: () => endpoints,
    log: silentLogger,
  });
  const runner = {
    workerId: 'clock-worker',
    leaseMs: 3_600_000,
    runClaimed: (job: ClaimedJob) => {
      probes.push(Date.now());
      states.observe(job, up.value ? answered(name, true) : refused(name, true));
    },
    wake: () => undefined,
  };
  const readAlerts = async () => {
    const last = alerts.at(-1)?.id ?? 0;
    const res = await db.pool.query<{ id: string; action: string; details: Record<string, unknown> }>(
      `select id, action, details from audit_log where target_id = $1 and action like 'endpoint.%' and id > $2 order by id`,
      [name, last],
    );
    for (const r of res.rows) alerts.push({ id: Number(r.id), action: r.action, at: Date.now(), details: r.details });
  };
  const settle = async () => {
    for (let i = 0; i < 4; i++) {
      await vi.advanceTimersByTimeAsync(0);
      await states.settled();
    }
    await readAlerts();
  };
  const [first] = (await db.pool.query<{ id: string }>(`select id from job_queue where endpoint = $1 limit 1`, [name])).rows;
  const job = { id: first!.id, type: WEBHOOK_JOB, endpoint: name } as ClaimedJob;
  await states.start(runner);
  return {
    states,
    config,
    probes,
    up,
    alerts,
    settle,
    step: async (ms = 1_000) => {
      await setClock(Date.now() + ms);
      await vi.advanceTimersByTimeAsync(ms);
      await settle();
    },
    feed: async (n, outcome) => {
      for (let i = 0; i < n; i++) states.observe(job, outcome);
      await settle();
    },
    circuit: async () =>
      (await db.pool.query<{ circuit: string }>(`select circuit from endpoint_state where endpoint = $1`, [name])).rows[0]?.circuit,
    stop: async () => {
      vi.useRealTimers();
      await states.stop();
    },
  };
}
