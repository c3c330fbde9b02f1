// slow-endpoints (bench/README.md#slow-endpoints): BENCH_SLOW_ENDPOINTS endpoints that all answer
// 200 after BENCH_SLOW_DELAY_MS, none failing or hanging. acw-webhooks with its default config
// against the peers at BENCH_SLOW_CONCURRENCY: a drain (deliveries/s, CPU and PostgreSQL writes per
// delivery) and a steady phase at an offered rate (delivery latency). acw's ceiling is
// endpoints x max_in_flight / latency.
import { columnLabel, columnTag, receiverConfig, runDrain, runSteady } from '../lib/endpoints.mjs';
import { int, int0, list, RUN_TIMEOUT_S } from '../lib/env.mjs';
import { fmt, ge, median, perRun, ratio, round, rx, targetsMarkdown } from '../lib/report.mjs';
import { acw, SYSTEMS as ADAPTERS } from '../systems/index.mjs';

export const SLOW = {
  endpoints: int('BENCH_SLOW_ENDPOINTS', 20),
  hanging: 0,
  delayMs: int0('BENCH_SLOW_DELAY_MS', 100),
  failPct: 0,
  events: int('BENCH_SLOW_EVENTS', 20_000),
  rate: int('BENCH_SLOW_RATE', 1_000),
  seconds: int('BENCH_SLOW_SECONDS', 10),
  waitS: 30,
  enqueueConnections: 16,
  concurrency: list('BENCH_SLOW_CONCURRENCY', ['500']).map((c) => Math.max(1, Math.round(Number(c)))),
  phases: list('BENCH_SLOW_PHASES', ['drain', 'steady']),
};
if (SLOW.endpoints > 1000) throw new Error('BENCH_SLOW_ENDPOINTS: at most 1000 (paths /e/000 to /e/999)');

/** acw with its own config (the defaults); each peer once per BENCH_SLOW_CONCURRENCY value. */
const SYSTEMS = ['acw-default', 'graphile-tuned', 'pgboss-tuned'];
const columns = (keys) => keys.flatMap((key) => (key.startsWith('acw') ? [null] : SLOW.concurrency).map((c) => [key, c]));

/** Deliveries per second the column could reach if nothing but the receivers' answer time bound it. */
async function ceiling(key, concurrency) {
  const perSecond = 1000 / Math.max(1, SLOW.delayMs);
  if (concurrency) return { ceiling_per_s: round(concurrency * perSecond, 0) };
  const mif = await acw.maxInFlight(ADAPTERS[key].variant);
  return { max_in_flight: mif, ceiling_per_s: round(SLOW.endpoints * mif * perSecond, 0) };
}

async function runSlow(ctx, _key, run) {
  const receiver = await ctx.endpointReceiver(receiverConfig(SLOW));
  for (const [key, c] of columns(SYSTEMS.filter((k) => ctx.only.includes(k)))) {
    const extra = await ceiling(key, c);
    for (const phase of SLOW.phases) {
      ctx.note(`slow-endpoints ${phase} run ${run}: ${columnTag(key, c)}`);
      const opts = { scenario: 'slow-endpoints', set: SLOW, rx: receiver, key, concurrency: c, run, extra };
      if (phase === 'drain') await runDrain(ctx, { ...opts, pgWrites: true });
      else if (phase === 'steady') await runSteady(ctx, opts);
      else throw new Error(`BENCH_SLOW_PHASES: unknown phase ${phase} (drain, steady)`);
    }
  }
}

const medianOf = (xs, f) => median(xs.map(f));
const perDelivery = (r, x) => (x * 1e6) / Math.max(1, r.completed);

/** One entry per column that ran: medians over runs. */
export function summarizeSlow(rs) {
  const mine = rs.filter((r) => r.scenario === 'slow-endpoints');
  const ref = columns(SYSTEMS).find(([key]) => key.startsWith('graphile'));
  const isRef = (r) => ref && r.system === ref[0] && r.concurrency === ref[1];
  const cols = [];
  for (const [key, c] of columns(SYSTEMS)) {
    const of = mine.filter((r) => r.system === key && (r.concurrency ?? null) === c);
    if (of.length === 0) continue;
    const drain = of.filter((r) => r.phase === 'drain');
    const steady = of.filter((r) => r.phase === 'steady');
    const isMe = (r) => r.phase === 'drain' && r.system === key && (r.concurrency ?? null) === c;
    cols.push({
      tag: columnTag(key, c),
      system: key,
      concurrency: c,
      label: columnLabel(key, c),
      deliveries: medianOf(drain, (r) => r.drain_per_s),
      // Taken within each run (the two ran back to back), then the median.
      xRef: perRun(mine, isMe, (r) => r.phase === 'drain' && isRef(r), 'drain_per_s', ratio),
      ceiling: medianOf(of, (r) => r.ceiling_per_s),
      timedOut: drain.some((r) => r.timed_out),
      seconds: medianOf(drain, (r) => r.seconds),
      cpu: {
        worker: medianOf(drain, (r) => perDelivery(r, r.cpu_s.worker)),
        pg: medianOf(drain, (r) => perDelivery(r, r.cpu_s.pg)),
        receiver: medianOf(drain, (r) => perDelivery(r, r.cpu_s.receiver)),
      },
      writes: {
        wal: medianOf(drain, (r) => r.pg_writes_per_job?.wal_bytes),
        fpi: medianOf(drain, (r) => r.pg_writes_per_job?.wal_fpi_bytes),
        index: medianOf(drain, (r) => r.pg_writes_per_job?.index_entries),
      },
      p50: medianOf(steady, (r) => r.p50_ms),
      p95: medianOf(steady, (r) => r.p95_ms),
      p99: medianOf(steady, (r) => r.p99_ms),
      missing: medianOf(steady, (r) => r.missing),
      steadyRuns: steady.length,
      offered: medianOf(steady, (r) => r.offered_per_s),
      rss: medianOf(of, (r) => r.peak_rss_mb),
    });
  }
  return { ref: ref ? columnTag(...ref) : null, cols };
}

function slowMarkdown({ ref, cols }) {
  const refLabel = cols.find((c) => c.tag === ref)?.label ?? 'graphile-worker';
  const lines = [`| slow endpoints | ${cols.map((c) => c.label).join(' | ')} |`, `| --- | ${cols.map(() => '---').join(' | ')} |`];
  const row = (name, f) => lines.push(`| ${name} | ${cols.map(f).join(' | ')} |`);
  const ms = (x) => (x === null ? `> ${SLOW.waitS} s` : fmt(x, 1));
  row(`drain, deliveries/s (x ${refLabel}, per run; of ceiling)`, (c) =>
    c.deliveries === null
      ? 'n/a'
      : `${fmt(c.deliveries)} (${rx(c.xRef)}; ${c.ceiling ? `${Math.round((100 * c.deliveries) / c.ceiling)}%` : 'n/a'})${c.timedOut ? ' †' : ''}`,
  );
  row('ceiling, deliveries/s (acw: endpoints x max_in_flight / latency; peers: concurrency / latency)', (c) => fmt(c.ceiling));
  row('drain, seconds to the last delivery', (c) => fmt(c.seconds, 1));
  row('drain, CPU µs/delivery worker / PostgreSQL / receiver', (c) =>
    c.cpu.worker === null ? 'n/a' : `${fmt(c.cpu.worker)} / ${fmt(c.cpu.pg)} / ${fmt(c.cpu.receiver)}`,
  );
  row('drain, PostgreSQL writes per delivery: WAL bytes (full-page images) / index entries', (c) =>
    c.writes.wal === null ? 'n/a' : `${fmt(c.writes.wal)} (${fmt(c.writes.fpi)}) / ${fmt(c.writes.index, 1)}`,
  );
  row(`steady ${fmt(SLOW.rate)}/s, delivery latency p50 / p95 / p99 ms (notify to arrival)`, (c) =>
    c.steadyRuns === 0 ? 'n/a' : `${ms(c.p50)} / ${ms(c.p95)} / ${ms(c.p99)}${c.missing ? ` (${fmt(c.missing)} not arrived)` : ''}`,
  );
  const short = (c) => c.offered !== null && c.offered < 0.95 * SLOW.rate;
  row('steady, offered events/s', (c) => `${fmt(c.offered)}${short(c) ? ' ‡' : ''}`);
  row('peak RSS MB (worker)', (c) => fmt(c.rss));
  const out = [
    `Slow endpoints: ${SLOW.endpoints} endpoints answering 200 in ${SLOW.delayMs} ms; drain ${fmt(SLOW.events)} events, steady ${fmt(SLOW.rate)}/s for ${SLOW.seconds} s. Medians over runs.`,
    '',
    ...lines,
  ];
  if (cols.some((c) => c.timedOut))
    out.push(
      '',
      `† a drain did not finish within BENCH_RUN_TIMEOUT_S (${RUN_TIMEOUT_S} s): the rate is the deliveries by then over that time.`,
    );
  if (cols.some(short))
    out.push('', `‡ the enqueue side fell short of ${fmt(SLOW.rate)}/s: that column's latencies are not at the offered rate.`);
  return out.join('\n');
}

/** Issue 26's target: acw default at least 1.2x graphile-worker at concurrency 500 (the first peer column). */
function slowTargets({ ref, cols }) {
  const a = cols.find((c) => c.system === 'acw-default');
  const refLabel = cols.find((c) => c.tag === ref)?.label ?? 'graphile-worker';
  const x = a?.xRef ?? null;
  const t = [
    {
      name: `slow endpoints drain, acw default >= 1.2x ${refLabel} (median of per-run ratios)`,
      value: rx(x),
      goal: '>= 1.20x',
      ok: ge(x, 1.2),
    },
  ];
  return { list: t, markdown: targetsMarkdown(t) };
}

function report(results) {
  const sum = summarizeSlow(results);
  if (sum.cols.length === 0) return { md: null, json: { slow_endpoints: null } };
  const tg = slowTargets(sum);
  return {
    md: `## Slow endpoints\n\n${slowMarkdown(sum)}\n\n### Slow endpoints targets\n\n${tg.markdown}`,
    json: { slow_endpoints: { ...sum, targets: tg.list } },
  };
}

export default { name: 'slow-endpoints', run: runSlow, report, meta: () => ({ slow_endpoints: SLOW }) };
