// The harness every scenario runs on (bench/README.md#adding-a-scenario): one embedded PostgreSQL,
// the receivers, template databases per system, worker children, and where results go. run.mjs
// starts it once and hands each scenario's run() the `ctx` it returns.
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { sleep } from './common.mjs';
import { BACKLOG, HEAP_SNAPSHOT_AT_S, PROFILE } from './env.mjs';
import { startServer } from './pg.mjs';
import { spawnChild } from './proc.mjs';
import { acw, SYSTEMS } from '../systems/index.mjs';

export const BENCH = fileURLToPath(new URL('../', import.meta.url));
const RESULTS_DIR = join(BENCH, 'results');

export const note = (...a) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...a);

/** Children still running (workers, receivers), ended by pid at shutdown. */
const live = new Set();
/** What scenarios asked to be done at shutdown (the history scenario's own server), before PostgreSQL stops. */
const cleanups = [];
const receivers = new Set();
let running = null;

/** Fork a bench child (worker, receiver, ceiling) and track it until it exits. */
function track(c) {
  live.add(c);
  void c.exited.then(() => live.delete(c));
  return c;
}

/**
 * A receiver child over IPC (receiver.mjs, fleet-receiver.mjs): reset between runs, stats after,
 * 'reached' when its target is met.
 */
async function startReceiver(file, envVar, cfg, path = '') {
  const c = track(spawnChild(join(BENCH, file), envVar ? { envVar, cfg } : {}));
  receivers.add(c);
  const { port } = await c.wait('listening', 10_000);
  return {
    child: c,
    pid: c.pid,
    origin: `http://127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}${path}`,
    async reset(opts) {
      c.clearInbox();
      c.send({ cmd: 'reset', ...opts });
      await c.wait('reset-ok', 10_000);
    },
    async stats(arrivals = false, timeoutMs = 10_000, timeline = false) {
      c.send({ cmd: 'stats', arrivals, timeline });
      return c.wait('stats', timeoutMs);
    },
    wait: (type, ms) => c.wait(type, ms),
  };
}

/** Starts PostgreSQL and the receiver; returns the context scenarios run in. */
export async function startHarness({ stamp, only }) {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const profDir = join(RESULTS_DIR, 'prof', stamp);
  if (PROFILE) mkdirSync(profDir, { recursive: true });
  const jsonl = join(RESULTS_DIR, `run-${stamp}.jsonl`);
  const results = [];
  const templates = new Map();
  const endpointReceivers = new Map();

  const server = await startServer({ profile: PROFILE });
  running = server;
  note(`PostgreSQL ${server.version} at ${server.url.replace(/:[^:@/]+@/, ':***@')}; ${JSON.stringify(server.settings)}`);
  // Only a failure to read the WAL's record stats, never a failed run: lib/pgstats.mjs then reports bytes alone.
  await server.admin.query('create extension if not exists pg_walinspect').catch((e) => note('pg_walinspect unavailable:', e.message));
  const receiver = await startReceiver('receiver.mjs', null, null, '/hooks');

  const ctx = {
    server,
    receiver,
    /** The systems this invocation runs (BENCH_SYSTEMS). */
    only,
    stamp,
    resultsDir: RESULTS_DIR,
    profDir,
    jsonl,
    results,
    note,
    /** One result: kept for the summary, printed as a JSON line and appended to the run's .jsonl. */
    emit(r) {
      results.push(r);
      const line = JSON.stringify(r);
      console.log(line);
      appendFileSync(jsonl, `${line}\n`);
    },
    /** The template database of a system (migrated, with the backlog rows if asked), built once. */
    async template(key, backlog) {
      const mod = SYSTEMS[key].mod;
      const name = `tpl_${mod.name}${backlog ? '_backlog' : ''}`;
      if (!templates.has(name)) {
        const t0 = performance.now();
        await mod.createTemplate(server, name, backlog ? { backlog: BACKLOG } : {});
        note(`template ${name} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        templates.set(name, name);
      }
      return name;
    },
    /** A worker child (worker.mjs) for `cfg`; `profileName` names its profile and log files. */
    workerChild(cfg, profileName) {
      const execArgv =
        PROFILE && profileName ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${profileName}.cpuprofile`] : [];
      if (cfg.system === 'acw' && process.env.BENCH_ACW_NODE_OPTIONS)
        execArgv.push(...process.env.BENCH_ACW_NODE_OPTIONS.split(' ').filter(Boolean));
      if (PROFILE && profileName && HEAP_SNAPSHOT_AT_S !== null)
        execArgv.push('--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${profDir}`);
      const stdoutFile = process.env.BENCH_LOG_DIR && profileName ? join(process.env.BENCH_LOG_DIR, `${profileName}.log`) : undefined;
      return track(spawnChild(join(BENCH, 'worker.mjs'), { envVar: 'BENCH_WORKER', cfg, execArgv, stdoutFile }));
    },
    /** `fn` runs at shutdown, after the children are ended and before PostgreSQL stops. */
    onShutdown: (fn) => cleanups.push(fn),
    /** Any other bench child (ceiling.mjs), tracked like the workers. */
    spawn: (file, opts) => track(spawnChild(join(BENCH, file), opts)),
    /** Graceful stop (up to 30 s), then SIGTERM. */
    async stopChild(c) {
      if (!c || c.exit) return;
      c.send({ cmd: 'stop' });
      await Promise.race([c.exited, sleep(30_000)]);
      if (!c.exit) await c.kill();
    },
    /**
     * fleet-receiver.mjs with `cfg` (endpoints, hanging, delayMs, failPct), one child per distinct
     * cfg, started at first use and kept until shutdown.
     */
    async endpointReceiver(cfg) {
      const k = JSON.stringify(cfg);
      if (!endpointReceivers.has(k)) endpointReceivers.set(k, startReceiver('fleet-receiver.mjs', 'BENCH_FLEET_RECEIVER', cfg));
      return endpointReceivers.get(k);
    },
    /**
     * What-if experiments only (never in the published figures): BENCH_ACW_DB_SQL is run on, and
     * BENCH_ACW_DB_SETTINGS="k=v;k=v" applied with ALTER DATABASE to, acw-webhooks' run databases,
     * e.g. plan_cache_mode=force_custom_plan to measure what fixing a generic-plan problem in src/
     * would gain before anyone changes src/.
     */
    async experimentSettings(mod, db) {
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
    },
  };
  return ctx;
}

/** Ends every child still running (receivers asked to exit first), then PostgreSQL. */
export async function stopHarness() {
  // Deleting from a Set while iterating it is safe (each child removes itself when it exits).
  for (const c of live) {
    if (receivers.has(c)) {
      c.send({ cmd: 'exit' });
      await Promise.race([c.exited, sleep(3_000)]);
    }
    await c.kill().catch(() => undefined);
  }
  for (const fn of cleanups.splice(0)) await Promise.resolve(fn()).catch((e) => note('a cleanup at shutdown failed:', e.message));
  await running?.stop().catch((e) => note('stopping PostgreSQL failed:', e.message));
  running = null;
}
