// fleet (issue 12, bench/README.md#fleet): 100 endpoints with slow, failing and hanging receivers.
// acw-webhooks with its own config against the peers at BENCH_FLEET_CONCURRENCY; a drain of events
// enqueued up front and a steady phase at an offered rate.
import { columnLabel, columnTag, receiverConfig, runDrain, runSteady } from '../lib/endpoints.mjs';
import { int, int0, list, RUN_TIMEOUT_S } from '../lib/env.mjs';
import { fmt, median, medianWhere, ratio, rx, targetsMarkdown } from '../lib/report.mjs';

export const FLEET = {
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

/** The peers run once per BENCH_FLEET_CONCURRENCY value; acw with its own config. */
const SYSTEMS = ['acw-default', 'acw-tuned', 'graphile-tuned', 'pgboss-tuned'];
const columns = (keys) => keys.flatMap((key) => (key.startsWith('acw') ? [null] : FLEET.concurrency).map((c) => [key, c]));

async function runFleet(ctx, _key, run) {
  const receiver = await ctx.endpointReceiver(receiverConfig(FLEET));
  for (const [key, c] of columns(SYSTEMS.filter((k) => ctx.only.includes(k)))) {
    for (const phase of FLEET.phases) {
      ctx.note(`fleet ${phase} run ${run}: ${columnTag(key, c)}`);
      const opts = { scenario: 'fleet', set: FLEET, rx: receiver, key, concurrency: c, run };
      if (phase === 'drain') await runDrain(ctx, opts);
      else if (phase === 'steady') await runSteady(ctx, opts);
      else throw new Error(`BENCH_FLEET_PHASES: unknown phase ${phase} (drain, steady)`);
    }
  }
}

const medianOf = (xs, f) => median(xs.map(f));
const isPeer = (c) => !c.system.startsWith('acw');

/** One entry per fleet column that ran: medians over runs. */
export function summarizeFleet(rs) {
  const fr = rs.filter((r) => r.scenario === 'fleet');
  const cols = [];
  for (const [key, c] of columns(SYSTEMS)) {
    const mine = fr.filter((r) => r.system === key && (r.concurrency ?? null) === c);
    if (mine.length === 0) continue;
    const drain = mine.filter((r) => r.phase === 'drain');
    const steady = mine.filter((r) => r.phase === 'steady');
    const runs = [...new Set(mine.map((r) => r.run))];
    cols.push({
      tag: columnTag(key, c),
      system: key,
      concurrency: c,
      label: columnLabel(key, c),
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
  return cols;
}

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
export function fleetTargets(cols, lab) {
  const a = cols.find((c) => c.system === 'acw-default');
  const peers = cols.filter((c) => isPeer(c) && c.drain !== null);
  const best = peers.length ? Math.max(...peers.map((c) => c.drain)) : null;
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
  return { list: t, markdown: targetsMarkdown(t, 'not determined') };
}

function report(results) {
  const cols = summarizeFleet(results);
  // acw default's rate in the deliver scenario of the same invocation (the drain target's second goal).
  const lab = medianWhere(results, (r) => r.scenario === 'deliver' && r.system === 'acw-default' && !r.skipped, 'jobs_per_s');
  const ftg = cols.length ? fleetTargets(cols, lab) : null;
  return {
    md: ftg ? `## Fleet\n\n${fleetMarkdown(cols)}\n\n### Fleet targets\n\n${ftg.markdown}` : null,
    json: { fleet: cols, fleet_targets: ftg?.list ?? [] },
  };
}

export default { name: 'fleet', run: runFleet, report, meta: () => ({ fleet: FLEET }) };
