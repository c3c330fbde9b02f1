// One throughput run (the deliver, noop and backlog scenarios, bench/README.md#scenarios): enqueue
// up front, CHECKPOINT, start the worker and the clock, stop the clock at the last completion the
// database confirms.
import { loadavg } from 'node:os';
import pg from 'pg';
import { dumpSeqScans, logMark } from './auto-explain.mjs';
import { peakRssMb, sleep, wallNow } from './common.mjs';
import { BACKLOG, HEAP_SNAPSHOT_AT_S, N as DEFAULT_N, PROFILE, RUN_TIMEOUT_S } from './env.mjs';
import { activityDelta, cpuDelta, cpuNow, dbActivity, perJob, pgssDump, pgssReset, POSTGRES, walMark, walWritten } from './pgstats.mjs';
import { machineTicks } from './proc.mjs';
import { round } from './report.mjs';
import { graphile, label, pgboss, SYSTEMS } from '../systems/index.mjs';

/**
 * `scenario` 'deliver' and 'backlog' POST to the receiver (backlog on the template with history),
 * 'noop' runs a handler that does nothing. `pgWrites`: also what PostgreSQL wrote to the WAL per
 * job (lib/pgstats.mjs), read after the clock stopped. The history scenario runs it on its own
 * server (`on`: {server, template, copy strategy, tag for the database name and the result's
 * fields, prepare(url) before the enqueue; or `made`, a database it made itself}); the time to copy
 * the template is then reported.
 */
export async function runThroughput(
  ctx,
  scenario,
  key,
  run,
  { pgWrites = false, on = null, n: jobs = DEFAULT_N, enqueueOpts = {}, tag = null, fields = {} } = {},
) {
  // `n`, `enqueueOpts`, `tag` and `fields`: the ordered scenario's figures (their own job count,
  // ordering keys, database name and result fields).
  const N = jobs;
  const { receiver, note } = ctx;
  const server = on?.server ?? ctx.server;
  const { mod, variant } = SYSTEMS[key];
  const mode = scenario === 'noop' ? 'noop' : 'deliver';
  const backlog = scenario === 'backlog';
  const db = `b_${key.replace('-', '_')}_${scenario}${on?.tag ? `_${on.tag}` : ''}${tag ? `_${tag}` : ''}_${run}`;
  const tc = performance.now();
  // `on.made`: a database the caller made (and drops) itself, {url, copy_s}.
  const url = on?.made
    ? on.made.url
    : await server.createDatabase(db, on?.template ?? (await ctx.template(key, backlog)), { strategy: on?.copy });
  const copyS = on?.made ? on.made.copy_s : (performance.now() - tc) / 1000;
  await on?.prepare?.(url);
  if (!on) await ctx.experimentSettings(mod, db);
  const enq = await mod.enqueue(url, { mode, n: N, ...enqueueOpts });
  await server.checkpoint();
  await pgssReset(url);
  await receiver.reset({ target: mode === 'deliver' ? N : Infinity });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const w = ctx.workerChild({ system: mod.name, variant, mode, url, receiverUrl: receiver.url, target: N }, `${key}-${scenario}-${run}`);
  try {
    await w.wait('loaded', 60_000);
    const procs = { worker: w.pid, pg: POSTGRES, receiver: receiver.pid };
    const act0 = pgWrites ? await dbActivity(url) : null;
    const wal0 = pgWrites ? await walMark(server) : null;
    const log0 = logMark(server.logFile);
    const cpu0 = cpuNow(server, procs);
    const load0 = loadavg()[0];
    const ticks0 = machineTicks();
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
        mode === 'deliver' ? (await receiver.stats()).count : (w.send({ cmd: 'count' }), (await w.wait('count', 10_000)).handled);
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
    const cpu1 = cpuNow(server, procs);
    const load1 = loadavg()[0];
    const ticks1 = machineTicks();
    const wal1 = pgWrites ? await walMark(server) : null;
    const rss = await peakRssMb(w.pid);
    w.send({ cmd: 'stop' });
    const stopped = await w.wait('stopped', 30_000).catch(() => null);
    await w.exited;
    // The worker's backends flush their counters as they exit, a moment after its connections close.
    const act1 = pgWrites ? await sleep(1_000).then(() => dbActivity(url)) : null;
    const pgss = await pgssDump(url, `${key}-${scenario}-${run}`, ctx.profDir);
    const dbName = new URL(url).pathname.slice(1);
    const seqScans = dumpSeqScans(server.logFile, log0, dbName, ctx.profDir, dbName);
    const st = await receiver.stats();
    const verify = await mod.verify(client, { mode, since: t0 }, enq.ctx);
    const seconds = (tEnd - t0) / 1000;
    const done = timedOut ? timedOut.handled : N;
    const writes = pgWrites ? await walWritten(server, wal0, wal1) : null;
    const r = {
      scenario,
      system: key,
      label: label(key),
      run,
      ...(on ? { ...on.fields, copy_s: round(copyS, 1) } : {}),
      ...fields,
      jobs: N,
      ...(timedOut ? { timed_out: true, handled_before_timeout: done } : {}),
      seconds: round(seconds, 3),
      jobs_per_s: round(done / seconds, 0),
      enqueue_per_s: round(N / (enq.ms / 1000), 0),
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: cpuDelta(cpu0, cpu1),
      // The machine's 1-minute load average when the clock started and stopped (other work on it).
      load_1m: [round(load0, 2), round(load1, 2)],
      // The share of the machine's CPU time the hypervisor gave elsewhere during the window (/proc/stat steal).
      steal_pct: round((100 * (ticks1.steal - ticks0.steal)) / Math.max(1, ticks1.total - ticks0.total), 1),
      received: st.count,
      distinct_ids: st.distinct,
      signatures_checked: st.checked,
      bad_signatures: st.badSignatures,
      verify,
      ...(backlog ? { backlog: mod === graphile ? { completed: 0, future: BACKLOG.future } : BACKLOG } : {}),
      ...(writes ? { pg_writes: writes, pg_writes_per_job: perJob(writes, done) } : {}),
      ...(act1 ? { db_activity_per_job: activityDelta(act0, act1, done) } : {}),
      ...(pgss ? { pgss } : {}),
      ...(seqScans ? { auto_explain: seqScans } : {}),
    };
    ctx.emit(r);
    return r;
  } finally {
    if (!w.exit) await w.kill();
    await client.end().catch(() => undefined);
    if (!on?.made) await server.dropDatabase(db);
  }
}
