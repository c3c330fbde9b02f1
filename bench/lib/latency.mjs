// One latency run (the latency and http-latency scenarios): idle workers, then events enqueued one
// at a time at a fixed gap; latency from just before the enqueue call to the receiver's arrival time.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { percentile, sleep, wallNow } from './common.mjs';
import { distUrl } from './dist.mjs';
import { LAT_GAP, LAT_N, LAT_WARM, SPANS } from './env.mjs';
import { pgssDump, pgssReset } from './pgstats.mjs';
import { round } from './report.mjs';
import { joinSpans } from './spans.mjs';
import { label, SYSTEMS } from '../systems/index.mjs';

/**
 * LAT_WARM events one gap apart, numbered from `firstSeq` (outside the measured ones' numbers), each
 * sent when the last one's call has returned: a process's first deliveries plan its statements
 * (the fair claim 2-2.5 ms a plan, five custom plans per connection), open connections and compile
 * code, which a running service did long ago. Without them the first 40 or so of 2,000 events,
 * 2% of the samples, set acw's p99 (bench/README.md#latency-warm-up).
 */
export async function warmUp(enq, firstSeq) {
  for (let i = 0; i < LAT_WARM; i++) {
    const t = wallNow();
    await enq.enqueue(firstSeq + i);
    const wait = t + LAT_GAP - wallNow();
    if (wait > 0.5) await sleep(wait);
  }
}

/** Whether the build under test has the HTTP API (POST /v1/notify). */
export const httpAvailable = () => existsSync(new URL('http/index.js', distUrl()));

/**
 * `scenario` 'latency': the worker child enqueues to itself (outbox, or its own HTTP API for
 * entry 'http'). 'http-latency' (issue 14): acw's POST /v1/notify goes to a separate `serve` child
 * with jobs off while the worker child (jobs on, no API) delivers, as a deployment with `serve` and
 * `worker` processes runs; the peers as in 'latency' (enqueue here, a worker child of their own).
 */
export async function runLatency(ctx, key, entry, run, scenario = 'latency') {
  const { server, receiver } = ctx;
  const { mod, variant } = SYSTEMS[key];
  const separate = scenario === 'http-latency' && entry === 'http';
  if (entry === 'http' && !httpAvailable()) {
    const r = {
      scenario,
      system: key,
      label: label(key),
      entry,
      run,
      skipped: 'no HTTP server in this build (src/http is empty): POST /v1/notify not measured',
    };
    ctx.emit(r);
    return r;
  }
  const db = `b_${key.replace('-', '_')}_${scenario.replace('-', '_')}_${entry}_${run}`.toLowerCase();
  const url = await server.createDatabase(db, await ctx.template(key, false));
  await ctx.experimentSettings(mod, db);
  await receiver.reset({ target: LAT_N + LAT_WARM, latency: true });
  const spans = separate && SPANS;
  const base = { system: mod.name, variant, mode: 'deliver', url, receiverUrl: receiver.url, target: Infinity };
  const w = ctx.workerChild({ ...base, http: entry === 'http' && !separate, ...(spans ? { spans: 'worker' } : {}) });
  const api = separate ? ctx.workerChild({ ...base, http: true, jobs: false, ...(spans ? { spans: 'serve' } : {}) }) : null;
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
    await warmUp(enq, LAT_N);
    await sleep(500);
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
    await pgssDump(url, `${key}-${scenario}-${entry}-${run}`, ctx.profDir);
    const st = await receiver.stats(true);
    const arrivals = st.arrivals.filter(([seq]) => seq < LAT_N);
    const lat = arrivals.map(([seq, at]) => at - sent[seq]).toSorted((a, b) => a - b);
    const answer = Array.from(answered, (t, i) => t - sent[i]).toSorted((a, b) => a - b);
    let spanSummary;
    if (spans) {
      w.send({ cmd: 'spans' });
      api.send({ cmd: 'spans' });
      const [ws, as] = await Promise.all([w.wait('spans', 30_000), api.wait('spans', 30_000)]);
      // The serve side lists its requests in order: the warm-up's come first.
      const serveData = { ...as.data, requests: as.data.requests.slice(LAT_WARM) };
      const raw = { sent: [...sent], answered: [...answered], jobIds, arrivals, serve: serveData, worker: ws.data };
      writeFileSync(join(ctx.resultsDir, `spans-${ctx.stamp}-${run}.json`), JSON.stringify(raw));
      spanSummary = summarizeSpans(joinSpans({ ...raw, arrivals: new Map(arrivals) }));
    }
    const r = {
      scenario,
      system: key,
      label: label(key),
      entry,
      ...(separate ? { api: 'separate serve child, jobs.enabled false' } : {}),
      run,
      events: LAT_N,
      warm_up: LAT_WARM,
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
    ctx.emit(r);
    return r;
  } finally {
    await enq?.close().catch(() => undefined);
    for (const c of [api, w]) await ctx.stopChild(c);
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
