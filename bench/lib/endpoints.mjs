// Runs against many endpoints on one fleet-receiver.mjs (the fleet and slow-endpoints scenarios):
// a drain of events enqueued up front, and a steady phase at an offered rate. `set` describes the
// endpoints and the load: {endpoints, hanging, delayMs, failPct, events, rate, seconds, waitS,
// enqueueConnections}; acw runs with its own config, a peer at `concurrency`.
import { fleetHealthy, peakRssMb, percentile, sleep, wallNow } from './common.mjs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RUN_TIMEOUT_S } from './env.mjs';

/** BENCH_FLEET_TIMELINE=1: each drain also writes the receiver's in-flight samples (10 ms apart) to bench/results. */
const TIMELINE = process.env.BENCH_FLEET_TIMELINE === '1';
import { cpuDelta, cpuNow, perJob, pgssDump, pgssReset, POSTGRES, walMark, walWritten } from './pgstats.mjs';
import { round } from './report.mjs';
import { label, SYSTEMS } from '../systems/index.mjs';

/** One column of a table: acw with its own config, a peer at one concurrency. */
export const columnTag = (key, concurrency) => (concurrency ? `${key}-c${concurrency}` : key);
export const columnLabel = (key, concurrency) => (concurrency ? `${label(key)}, concurrency ${concurrency}` : label(key));

/** What fleet-receiver.mjs needs of a set: its endpoints and how they answer. */
export const receiverConfig = ({ endpoints, hanging, delayMs, failPct }) => ({ endpoints, hanging, delayMs, failPct });

function receiverFields(st) {
  return {
    receiver_lag_ms: st.lag,
    receiver_peak_connections: st.peakConnections,
    // Requests waiting for their answer, sampled every 10 ms from the first arrival to the target.
    receiver_in_flight: st.inFlight ? { ...st.inFlight, timeline: undefined } : null,
    answered_500: st.answered500,
    duplicates_200: st.duplicates200,
    hanging_arrivals: st.hangingArrivals,
    abandoned: st.abandoned,
    unknown_paths: st.unknown,
    signatures_checked: st.checked,
    bad_signatures: st.badSignatures,
  };
}

const names = (scenario, key, concurrency, phase, run) => {
  const tag = columnTag(key, concurrency);
  return {
    tag,
    db: `b_${tag.replaceAll('-', '_')}_${scenario.replaceAll('-', '_')}_${phase}_${run}`,
    profile: `${tag}-${scenario}-${phase}-${run}`,
  };
};

/**
 * Drain: set.events events enqueued up front, then the worker starts. The figure is healthy jobs
 * completed (first 200 per job id, as the receiver saw it) over the time from "go" to the last
 * healthy completion. The hanging endpoints' jobs count neither in the jobs nor in the clock.
 * `pgWrites`: also the WAL written per completed job (lib/pgstats.mjs). `extra`: fields the
 * scenario adds to the result.
 */
export async function runDrain(ctx, { scenario, set, rx, key, concurrency, run, pgWrites = false, extra = {} }) {
  const { server, note } = ctx;
  const { mod, variant } = SYSTEMS[key];
  const { tag, db, profile } = names(scenario, key, concurrency, 'drain', run);
  const url = await server.createDatabase(db, await ctx.template(key, false));
  await ctx.experimentSettings(mod, db);
  const enq = await mod.enqueue(url, { mode: 'fleet', n: set.events, fleet: set });
  await server.checkpoint();
  await pgssReset(url);
  const healthy = fleetHealthy(set.events, set);
  await rx.reset({ target: healthy, kind: 'completed' });
  const w = ctx.workerChild(
    { system: mod.name, variant, mode: 'fleet', url, receiverUrl: rx.origin, fleet: set, concurrency, target: Infinity },
    profile,
  );
  try {
    await w.wait('loaded', 60_000);
    const procs = { worker: w.pid, pg: POSTGRES, receiver: rx.pid };
    const wal0 = pgWrites ? await walMark(server) : null;
    const cpu0 = cpuNow(server, procs);
    const t0 = wallNow();
    w.send({ cmd: 'go' });
    let timedOut = null;
    await Promise.race([
      rx.wait('reached', RUN_TIMEOUT_S * 1000),
      w.exited.then((e) => Promise.reject(new Error(`worker exited (${e.code ?? e.signal}): ${w.stderr()}`))),
    ]).catch((err) => {
      if (!/timed out/.test(err.message)) throw err;
      timedOut = { at: wallNow() };
    });
    const st = await rx.stats(false, 30_000, TIMELINE);
    if (TIMELINE && st.inFlight?.timeline)
      writeFileSync(join(ctx.resultsDir ?? 'bench/results', `${profile}-in-flight.json`), JSON.stringify(st.inFlight.timeline));
    const cpu1 = cpuNow(server, procs);
    const wal1 = pgWrites ? await walMark(server) : null;
    const rss = await peakRssMb(w.pid);
    if (timedOut)
      note(
        `${tag} ${scenario} drain: not done after ${RUN_TIMEOUT_S} s (${st.completed} of ${healthy} healthy jobs completed); reporting the partial rate`,
      );
    // Let the hanging requests go first, so the worker's stop does not wait for their timeouts.
    await rx.reset({});
    w.send({ cmd: 'stop' });
    const stopped = await w.wait('stopped', 30_000).catch(() => null);
    await w.exited;
    const pgss = await pgssDump(url, profile, ctx.profDir);
    const writes = pgWrites ? await walWritten(server, wal0, wal1) : null;
    const end = timedOut ? timedOut.at : st.lastCompletion;
    const seconds = (end - t0) / 1000;
    const firstPass = st.lastFirst === null ? null : (st.lastFirst - t0) / 1000;
    const r = {
      scenario,
      phase: 'drain',
      system: key,
      concurrency: concurrency ?? null,
      label: columnLabel(key, concurrency),
      run,
      events: set.events,
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
      enqueue_per_s: round(set.events / (enq.ms / 1000), 0),
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: cpuDelta(cpu0, cpu1),
      ...receiverFields(st),
      ...(writes ? { pg_writes: writes, pg_writes_per_job: perJob(writes, st.completed) } : {}),
      ...(pgss ? { pgss } : {}),
      ...extra,
    };
    ctx.emit(r);
    return r;
  } finally {
    if (!w.exit) await w.kill();
    await server.dropDatabase(db);
  }
}

/**
 * Steady: set.rate events per second for set.seconds, from set.enqueueConnections connections,
 * with the worker idle and listening first. Latency runs from just before each enqueue call to the
 * first attempt's arrival at the receiver (healthy endpoints only). An event whose first attempt
 * has not arrived set.waitS after the last enqueue counts as slower than all.
 */
export async function runSteady(ctx, { scenario, set, rx, key, concurrency, run, extra = {} }) {
  const { server } = ctx;
  const { mod, variant } = SYSTEMS[key];
  const { db, profile } = names(scenario, key, concurrency, 'steady', run);
  const url = await server.createDatabase(db, await ctx.template(key, false));
  await ctx.experimentSettings(mod, db);
  const total = set.rate * set.seconds;
  const healthy = fleetHealthy(total, set);
  await rx.reset({ target: healthy, kind: 'first' });
  const w = ctx.workerChild(
    { system: mod.name, variant, mode: 'fleet', url, receiverUrl: rx.origin, fleet: set, concurrency, target: Infinity },
    profile,
  );
  let enq = null;
  try {
    await w.wait('loaded', 60_000);
    w.send({ cmd: 'go' });
    await w.wait('started', 60_000);
    enq = await mod.openFleet(url, { fleet: set, connections: set.enqueueConnections });
    await sleep(1_500); // workers idle, listeners connected
    await pgssReset(url);
    const procs = { worker: w.pid, pg: POSTGRES, receiver: rx.pid };
    const cpu0 = cpuNow(server, procs);
    const sent = new Float64Array(total);
    const late = new Float64Array(total);
    const gap = 1000 / set.rate;
    const start = wallNow() + 5;
    // Open loop: event i is due at start + i * gap, on connection i % K; a connection that fell
    // behind sends at once (how far behind shows in enqueue_late_ms).
    const K = set.enqueueConnections;
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
    await rx.wait('reached', set.waitS * 1000).catch(() => null);
    const st = await rx.stats(true, 30_000);
    const cpu1 = cpuNow(server, procs);
    const rss = await peakRssMb(w.pid);
    const pgss = await pgssDump(url, profile, ctx.profDir);
    await rx.reset({});
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
      scenario,
      phase: 'steady',
      system: key,
      concurrency: concurrency ?? null,
      label: columnLabel(key, concurrency),
      run,
      rate: set.rate,
      seconds: set.seconds,
      events: total,
      offered_per_s: round(total / offeredS, 0),
      enqueue_late_ms: { p99: round(percentile(late.toSorted(), 99), 1), max: round(Math.max(...late), 1) },
      healthy,
      arrived: lat.length,
      missing,
      ...(missing ? { missing_after_s: set.waitS } : {}),
      p50_ms: p(50),
      p95_ms: p(95),
      p99_ms: p(99),
      max_ms: p(100),
      completed: st.completed,
      retried: st.retried,
      peak_rss_mb: round(Math.max(rss ?? 0, stopped?.maxRssMb ?? 0), 1),
      mem_peak_mb: stopped?.mem ?? null,
      cpu_s: cpuDelta(cpu0, cpu1),
      ...receiverFields(st),
      ...(pgss ? { pgss } : {}),
      ...extra,
    };
    ctx.emit(r);
    return r;
  } finally {
    await enq?.close().catch(() => undefined);
    if (!w.exit) await w.kill();
    await server.dropDatabase(db);
  }
}
