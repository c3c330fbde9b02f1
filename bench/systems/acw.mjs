// acw-webhooks, driven through its public entry points from dist/: the outbox (`notifyMany` /
// `notify`) for events, `enqueueJobs` for the no-op jobs, and `Service.start` for the worker.
import pg from 'pg';
import { SECRET, TOPIC, eventData, fleetData, fleetName, fleetPath, fleetTopic } from '../lib/common.mjs';
import { dist } from '../lib/dist.mjs';
import { HISTORY_ENDPOINTS, HISTORY_TOPICS, layoutOf, loadFinished, loadFuture } from '../lib/history-data.mjs';

/** The API token of the `service` principal the latency scenario posts with. */
export const TOKEN = 'bench-service-token-0123456789';
/** The API token of a `viewer` (the history scenario's operator reads, as the dashboard makes them). */
export const VIEWER_TOKEN = 'bench-viewer-token-0123456789';

export const name = 'acw';
export const NOOP_TYPE = 'bench.noop';

const env = (k, d) => (process.env[k] ? Number(process.env[k]) : d);

/**
 * default: only what a deployment must set (database, endpoint url/secret/topics); everything else
 * as shipped (jobs.workers 32, max_in_flight 16 per endpoint, pool_size 10, log level info).
 * tuned: more deliveries in flight (workers and the endpoint's max_in_flight), nothing else.
 */
export const variants = {
  default: { label: 'acw-webhooks default' },
  tuned: {
    label: 'acw-webhooks tuned',
    workers: env('BENCH_ACW_WORKERS', 128),
    poolSize: env('BENCH_ACW_POOL', 10),
  },
};

export function describe(variant) {
  const v = variants[variant];
  return v.workers
    ? `jobs.workers ${v.workers}, max_in_flight ${v.workers}, pool_size ${v.poolSize}`
    : 'shipped defaults: jobs.workers 32, max_in_flight 16, pool_size 10';
}

/**
 * Deliveries in flight per endpoint per process for a variant: the tuned value, or the shipped
 * default read from the build's own config schema (so a changed default shows in the figures).
 */
export async function maxInFlight(variant) {
  const v = variants[variant];
  if (v.workers) return v.workers;
  const { parseConfig } = await dist('config/index.js');
  const raw = {
    database: { url: 'postgres://127.0.0.1/x' },
    notify: { webhook: { url: 'http://127.0.0.1/', secret: SECRET, topics: [TOPIC] } },
  };
  return parseConfig(raw).notify.webhook.max_in_flight;
}

// ---------------------------------------------------------------- orchestrator side

export async function createTemplate(server, db, { backlog } = {}) {
  const url = await server.createDatabase(db);
  const { migrate } = await dist('db/migrate.js');
  const { createPool } = await dist('db/pool.js');
  const pool = createPool({ url, size: 2, schema: 'public' });
  try {
    await migrate(pool, { schema: 'public' });
    if (backlog) await seedBacklog(pool, backlog);
  } finally {
    await pool.end();
  }
}

/**
 * History of a busy installation: `completed` finished jobs (each with its event and its one
 * attempt row, as a real delivery leaves them), and `future` jobs scheduled a day ahead. All
 * within the purge's retention, so nothing is purged during the run. On the history layout the
 * rows go straight into job_history, job_attempts, events and the per-minute counters, spread over
 * the last 10 hours (lib/history-data.mjs); on an older build's `jobs` table, as they always did.
 */
async function seedBacklog(pool, { completed, future }) {
  const client = await pool.connect();
  try {
    if ((await layoutOf(client)) === 'history') {
      const now = (await client.query(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0].ms;
      await loadFinished(client, { rows: completed, fromMs: now - 10 * 3_600_000, toMs: now, style: 'backlog' });
      await loadFuture(client, future);
    } else {
      await seedBacklogJobs(client, { completed, future });
    }
    await client.query('vacuum (freeze, analyze)');
  } finally {
    client.release();
  }
}

/** The backlog on the `jobs` table of builds before the history layout. */
async function seedBacklogJobs(db, { completed, future }) {
  const body = `'{"event_id":"' || e.id || '","topic":"order.paid","occurred_at":"' || to_char(e.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","data":{"seq":' || g || ',"order_id":"ord_' || lpad(g::text, 8, '0') || '","amount_cents":2500,"currency":"EUR","customer":{"id":"cus_1","email":"customer1@example.com"},"items":2}}'`;
  const step = 200_000;
  for (let lo = 1; lo <= completed; lo += step) {
    const hi = Math.min(completed, lo + step - 1);
    await db.query(
      `
      with g as (select g, gen_random_uuid() as eid, now() - (g % 36000) * interval '1 second' as t from generate_series($1::int, $2::int) g),
      e as (
        insert into events (id, topic, data, principal, dispatched_at, created_at)
        select eid, 'order.paid', jsonb_build_object('seq', g), 'outbox', t, t from g
        returning id, created_at),
      e2 as (select e.id, e.created_at, row_number() over () as g from e),
      j as (
        insert into jobs (id, type, payload, status, attempts, max_attempts, run_at, created_at, updated_at, completed_at, event_id, endpoint)
        select gen_random_uuid(), 'webhook.deliver', jsonb_build_object('topic', 'order.paid', 'body', ${body}),
          'completed', 1, 6, e.created_at, e.created_at, e.created_at + interval '40 ms', e.created_at + interval '40 ms', e.id, 'default'
        from e2 e
        returning id, completed_at)
      insert into webhook_attempts (job_id, attempt, endpoint, status_code, duration_ms, response_body, created_at)
      select id, 1, 'default', 200, 3, 'ok', completed_at from j`,
      [lo, hi],
    );
  }
  await db.query(
    `with g as (select g, gen_random_uuid() as eid, now() as t from generate_series(1, $1::int) g),
     e as (
       insert into events (id, topic, data, principal, dispatched_at, created_at)
       select eid, 'order.paid', jsonb_build_object('seq', g), 'outbox', t, t from g returning id, created_at),
     e2 as (select e.id, e.created_at, row_number() over () as g from e)
     insert into jobs (type, payload, status, attempts, max_attempts, run_at, event_id, endpoint)
     select 'webhook.deliver', jsonb_build_object('topic', 'order.paid', 'body', ${body}), 'pending', 0, 6,
       now() + interval '1 day' + (g % 3600) * interval '1 second', e.id, 'default'
     from e2 e`,
    [future],
  );
}

/**
 * Enqueue `n` up front: events through the outbox (`notifyMany`, batches), or no-op jobs
 * (`enqueueJobs`). mode 'fleet': event `seq` has the topic of endpoint `seq % fleet.endpoints`.
 */
export async function enqueue(url, { mode, n, batch = 1000, fleet, orderingKeys = 0 }) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    if (mode === 'noop') {
      const { enqueueJobs } = await dist('queue/transitions.js');
      const { channels } = await dist('db/sql.js');
      const ch = channels('public').jobs;
      const t0 = performance.now();
      for (let i = 0; i < n; i += batch) {
        const jobs = [];
        for (let k = i; k < Math.min(n, i + batch); k++) jobs.push({ type: NOOP_TYPE, payload: { seq: k }, maxAttempts: 6 });
        await enqueueJobs(client, jobs, ch);
      }
      return { ms: performance.now() - t0, ctx: {} };
    }
    const { notifyMany } = await dist('outbox.js');
    const t0 = performance.now();
    for (let i = 0; i < n; i += batch) {
      const events = [];
      for (let k = i; k < Math.min(n, i + batch); k++) {
        events.push(
          mode === 'fleet'
            ? { topic: fleetTopic(k % fleet.endpoints), data: fleetData(k, fleet.endpoints) }
            : orderingKeys > 0
              ? { topic: TOPIC, data: eventData(k), orderingKey: `key-${k % orderingKeys}` }
              : { topic: TOPIC, data: eventData(k) },
        );
      }
      await notifyMany(client, events);
    }
    return { ms: performance.now() - t0, ctx: {} };
  } finally {
    await client.end();
  }
}

/** The table live jobs are in: job_queue on the history layout, else jobs. Read once per connection. */
const liveTables = new WeakMap();
async function liveTable(client) {
  if (!liveTables.has(client)) liveTables.set(client, (await layoutOf(client)) === 'history' ? 'job_queue' : 'jobs');
  return liveTables.get(client);
}

/** Nothing left to do: no undispatched event, no due pending job, no running job (all read from indexes). */
export async function isDone(client) {
  const live = await liveTable(client);
  const r = await client.query(`select
      not exists (select 1 from events where dispatched_at is null)
      and not exists (select 1 from ${live} where status = 'pending' and run_at < now() + interval '1 hour')
      and not exists (select 1 from ${live} where status in ('running', 'behind')) as done`);
  return r.rows[0].done;
}

export async function verify(client, { mode, since }) {
  if (mode === 'noop') {
    const r = await client.query(`select count(*)::int as n from jobs where type = $1 and status = 'completed'`, [NOOP_TYPE]);
    return { completed: r.rows[0].n };
  }
  if ((await liveTable(client)) === 'job_queue') {
    // The tables themselves: through the jobs view a filter on completed_at prunes no day partition.
    const h = await client.query(
      `select (select count(*)::int from job_history where status = 'completed' and finished_at >= to_timestamp($1 / 1000.0) - interval '5 s') as completed,
              (select count(*)::int from job_queue where status = 'pending' and run_at < now() + interval '1 hour')
                + (select count(*)::int from job_history where status = 'dead' and finished_at >= to_timestamp($1 / 1000.0) - interval '5 s') as not_completed,
              (select count(*)::int from job_attempts where created_at >= to_timestamp($1 / 1000.0) - interval '5 s') as attempts`,
      [since],
    );
    return h.rows[0];
  }
  const r = await client.query(
    `select (select count(*)::int from jobs where status = 'completed' and completed_at >= to_timestamp($1 / 1000.0) - interval '5 s') as completed,
            (select count(*)::int from jobs where status in ('dead', 'pending') and run_at < now() + interval '1 hour') as not_completed,
            (select count(*)::int from webhook_attempts where created_at >= to_timestamp($1 / 1000.0) - interval '5 s') as attempts`,
    [since],
  );
  return r.rows[0];
}

/** One event at a time, for the latency scenario. `entry`: 'outbox' (notify on a pg client) or 'http'. */
/**
 * An event as the HTTP scenarios post it. With BENCH_HTTP_KEYED=1 each carries its own idempotency
 * key, as `acw-webhooks/client` sends every event (keys are unique within a run's database).
 */
const httpEvent = (seq) =>
  process.env.BENCH_HTTP_KEYED === '1'
    ? { topic: TOPIC, data: eventData(seq), idempotency_key: `bench-${seq}` }
    : { topic: TOPIC, data: eventData(seq) };

export async function openLatency(url, { entry, httpUrl }) {
  if (entry === 'outbox') {
    const { notify } = await dist('outbox.js');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return {
      enqueue: (seq) => notify(client, TOPIC, eventData(seq)),
      close: () => client.end(),
    };
  }
  if (entry === 'http') {
    // POST /v1/notify on the worker's own HTTP server (an `acw-webhooks serve` process), through
    // one keep-alive connection.
    const { Pool } = await import('undici');
    const pool = new Pool(httpUrl, { connections: 1, pipelining: 1 });
    return {
      async enqueue(seq) {
        const res = await pool.request({
          path: '/v1/notify',
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify(httpEvent(seq)),
        });
        const text = await res.body.text();
        if (res.statusCode !== 202) throw new Error(`POST /v1/notify answered ${res.statusCode}`);
        return JSON.parse(text).job_ids[0];
      },
      close: () => pool.close(),
    };
  }
  throw new Error(`entry ${entry} is not available`);
}

/**
 * The HTTP API of a `serve` child, from `connections` keep-alive connections: POST /v1/notify of
 * event `seq`, and POST /v1/notify/batch of events `from` .. `to - 1` (one job each: one endpoint
 * matches every event). Both throw unless the answer is 202.
 */
export async function openHttp(httpUrl, { connections = 1, event = httpEvent } = {}) {
  const { Pool } = await import('undici');
  const pool = new Pool(httpUrl, { connections, pipelining: 1 });
  const post = async (path, body) => {
    const res = await pool.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
    });
    const text = await res.body.text();
    if (res.statusCode !== 202) throw new Error(`POST ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
    return text;
  };
  return {
    notify: (seq) => post('/v1/notify', event(seq)),
    batch(from, to) {
      const events = [];
      for (let k = from; k < to; k++) events.push(event(k));
      return post('/v1/notify/batch', { events });
    },
    close: () => pool.close(),
  };
}

/** The fleet's steady phase: `notify` (the outbox, one event per call) on a pool of `connections` clients. */
export async function openFleet(url, { fleet, connections }) {
  const { notify } = await dist('outbox.js');
  const pool = new pg.Pool({ connectionString: url, max: connections });
  // Dropping the run database ends whatever is still connected; that is not an error of the run.
  pool.on('error', () => undefined);
  await Promise.all(Array.from({ length: connections }, () => pool.query('select 1')));
  return {
    enqueue: (seq) => notify(pool, fleetTopic(seq % fleet.endpoints), fleetData(seq, fleet.endpoints)),
    close: () => pool.end(),
  };
}

/** The fleet's endpoints: each its own name, topic and path on the receiver; timeout and max_in_flight inherited. */
function fleetEndpoints(base, fleet) {
  return Array.from({ length: fleet.endpoints }, (_, e) => ({
    name: fleetName(e),
    url: base + fleetPath(e),
    secret: SECRET,
    topics: [fleetTopic(e)],
  }));
}

// ---------------------------------------------------------------- worker side

/**
 * `http`: also the HTTP API, as `acw-webhooks serve` runs it. `jobs: false`: `jobs.enabled: false`
 * (no dispatcher, workers or runners), the API-only `serve` of a deployment with separate workers.
 * `operator`: a `viewer` token too (VIEWER_TOKEN). mode 'history': the history scenario's 20
 * endpoints (names and topics of its rows, lib/history-data.mjs). `logLevel` overrides the level.
 */
export async function prepareWorker({
  url,
  receiverUrl,
  variant,
  mode,
  onHandled,
  http = false,
  jobs = true,
  fleet,
  operator = false,
  logLevel,
  topics,
}) {
  const { parseConfig } = await dist('config/index.js');
  const { createLogger } = await dist('log.js');
  const { Service } = await dist('service.js');
  const v = variants[variant];
  const raw = {
    database: { url, ...(v.poolSize ? { pool_size: v.poolSize } : {}) },
    log: { level: logLevel ?? process.env.BENCH_ACW_LOG_LEVEL ?? 'info' },
    ...(http
      ? {
          server: {
            listen: '127.0.0.1:0',
            auth: {
              users: [
                { name: 'bench', role: 'service', token: TOKEN },
                ...(operator ? [{ name: 'bench-viewer', role: 'viewer', token: VIEWER_TOKEN }] : []),
              ],
            },
          },
        }
      : {}),
    // The topic catalog and its validation (the topic-validation scenario).
    ...(topics ? { topics } : {}),
    ...(v.workers || !jobs ? { jobs: { ...(v.workers ? { workers: v.workers } : {}), ...(jobs ? {} : { enabled: false }) } } : {}),
    notify: {
      webhook: {
        ...(mode === 'fleet'
          ? { endpoints: fleetEndpoints(new URL(receiverUrl).origin, fleet) }
          : mode === 'history'
            ? {
                endpoints: HISTORY_ENDPOINTS.map((endpoint) => ({
                  name: endpoint,
                  url: `${new URL(receiverUrl).origin}/h/${endpoint}`,
                  secret: SECRET,
                  topics: HISTORY_TOPICS,
                })),
              }
            : { url: receiverUrl, secret: SECRET, topics: ['order.*'] }),
        ...(v.workers ? { max_in_flight: v.workers } : {}),
      },
    },
  };
  // The OTEL_* variables only (the tracing scenario sets them): the rest of the config is the bench's.
  const config = parseConfig(raw, Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('OTEL_'))));
  // The service's own logger at its default level (info: one webhook.attempt line per attempt),
  // to stdout, which the orchestrator points at /dev/null.
  const log = createLogger({ level: config.log.level });
  let svc = null;
  let app = null;
  const httpMod = http ? await dist('http/index.js') : null;
  const handlers = mode === 'noop' ? { [NOOP_TYPE]: async () => void onHandled(1) } : undefined;
  return {
    async start() {
      // What `acw-webhooks serve` / `worker` do before starting the service.
      (await dist('runtime.js')).tuneHeapForService();
      svc = await Service.start({ config, log, ...(handlers ? { handlers } : {}) });
      if (!httpMod) return {};
      app = await httpMod.createHttpServer(svc, { mode: 'serve' });
      const bound = await httpMod.listenHttp(app, '127.0.0.1:0');
      return { httpUrl: bound.url };
    },
    async stop() {
      await app?.close();
      await svc?.stop();
      log.flush?.();
    },
  };
}
