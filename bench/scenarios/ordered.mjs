// ordered: ordered delivery per key (docs/operations.md#ordered-delivery) against the unordered
// deliver of the same run: the deliver scenario's shape (events through the outbox up front, drained
// to the 1 ms receiver), every event keyed, with BENCH_ORDERED_KEYS distinct keys each, and one key
// (sequential: its rate is 1/latency) on a smaller count. acw only: the other systems have no keys.
import { loadavg } from 'node:os';
import { runThroughput } from '../lib/throughput.mjs';
import { fmt, median, pct, ratio, round } from '../lib/report.mjs';

const KEYS = (process.env.BENCH_ORDERED_KEYS ?? '10000,100')
  .split(',')
  .map(Number)
  .filter((k) => k > 0);
const ONE_KEY_JOBS = Number(process.env.BENCH_ORDERED_ONE_KEY_JOBS ?? 1000);

const perJobUs = (r, who) => ((r.cpu_s?.[who] ?? 0) * 1e6) / (r.handled_before_timeout ?? r.jobs);

/** One figure: `keys` 0 is the unordered deliver. */
async function figure(ctx, key, run, keys, n) {
  const load = loadavg()[0];
  const r = await runThroughput(ctx, 'ordered', key, run, {
    pgWrites: false,
    ...(n ? { n } : {}),
    enqueueOpts: { orderingKeys: keys },
    tag: keys === 0 ? 'unordered' : `k${keys}`,
    fields: { keys, load_1m: round(load, 1) },
  });
  return r;
}

export default {
  name: 'ordered',
  systems: ['acw-default', 'acw-tuned'],
  meta: () => ({ ordered_keys: KEYS, ordered_one_key_jobs: ONE_KEY_JOBS }),
  async run(ctx, key, run) {
    // Interleaved in one run, so the ratios compare figures taken under the same load.
    await figure(ctx, key, run, 0);
    for (const k of KEYS) await figure(ctx, key, run, k);
    await figure(ctx, key, run, 1, ONE_KEY_JOBS);
  },
  report(results) {
    const rs = results.filter((r) => r.scenario === 'ordered' && !r.skipped);
    if (rs.length === 0) return { md: null, json: {} };
    const systems = [...new Set(rs.map((r) => r.system))];
    const keysList = [0, ...KEYS, 1];
    const cell = (sys, keys, f) => median(rs.filter((r) => r.system === sys && r.keys === keys).map(f));
    const json = {};
    const rows = [];
    for (const sys of systems) {
      const base = cell(sys, 0, (r) => r.jobs_per_s);
      json[sys] = {};
      for (const keys of keysList) {
        const rate = cell(sys, keys, (r) => r.jobs_per_s);
        const worker = cell(sys, keys, (r) => perJobUs(r, 'worker'));
        const pg = cell(sys, keys, (r) => perJobUs(r, 'pg'));
        const load = cell(sys, keys, (r) => r.load_1m);
        const jobs = cell(sys, keys, (r) => r.jobs);
        json[sys][keys === 0 ? 'unordered' : `keys_${keys}`] = {
          jobs_per_s: rate,
          of_unordered: ratio(rate, base),
          worker_us_per_job: round(worker, 0),
          pg_us_per_job: round(pg, 0),
          load_1m: load,
        };
        rows.push(
          `| ${sys} | ${keys === 0 ? 'none (unordered)' : fmt(keys)} | ${fmt(jobs)} | ${fmt(rate)} | ${keys === 0 ? '' : pct(ratio(rate, base))} | ${fmt(worker)} | ${fmt(pg)} | ${fmt(load, 1)} |`,
        );
      }
    }
    const md = [
      '### Ordered delivery (every event keyed, against the unordered deliver of the same run)',
      '',
      '| system | distinct keys | jobs | jobs/s | of unordered | worker CPU µs/job | PostgreSQL CPU µs/job | load (1 min) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
      ...rows,
      '',
      'Target (issue 29): 10,000 keys at least 80% of the unordered rate. One key is sequential: its rate is 1/latency.',
    ].join('\n');
    return { md, json: { ordered: json } };
  },
};
