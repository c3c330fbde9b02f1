// ordered: ordered delivery per key (docs/operations.md#ordered-delivery) against the unordered
// deliver of the same run: the deliver scenario's shape (events through the outbox up front, drained
// to the 1 ms receiver), every event keyed, with BENCH_ORDERED_KEYS distinct keys each, and one key
// (sequential: its rate is 1/latency) on a smaller count. Then the failing-key figure
// (lib/failing-key.mjs): the other keys' latency with and without one key answered 500 for
// BENCH_ORDERED_FAIL_MS. acw only: the other systems have no keys.
import { loadavg } from 'node:os';
import { runFailingKey } from '../lib/failing-key.mjs';
import { runThroughput } from '../lib/throughput.mjs';
import { fmt, median, pct, ratio, round } from '../lib/report.mjs';

const KEYS = (process.env.BENCH_ORDERED_KEYS ?? '10000,100')
  .split(',')
  .map(Number)
  .filter((k) => k > 0);
const ONE_KEY_JOBS = Number(process.env.BENCH_ORDERED_ONE_KEY_JOBS ?? 1000);
/** The failing-key figure: how long the key fails (each phase lasts as long), on how many other keys, at what gap; 0 skips it. */
const FAIL_MS = Number(process.env.BENCH_ORDERED_FAIL_MS ?? 60_000);
const FAIL_KEYS = Number(process.env.BENCH_ORDERED_FAIL_KEYS ?? 100);
const FAIL_GAP_MS = Number(process.env.BENCH_ORDERED_FAIL_GAP_MS ?? 20);
/** One event in this many is on the failing key. */
const FAIL_EVERY = 10;

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
  meta: () => ({
    ordered_keys: KEYS,
    ordered_one_key_jobs: ONE_KEY_JOBS,
    ordered_fail_ms: FAIL_MS,
    ordered_fail_keys: FAIL_KEYS,
    ordered_fail_gap_ms: FAIL_GAP_MS,
  }),
  async run(ctx, key, run) {
    // Interleaved in one run, so the ratios compare figures taken under the same load.
    await figure(ctx, key, run, 0);
    for (const k of KEYS) await figure(ctx, key, run, k);
    await figure(ctx, key, run, 1, ONE_KEY_JOBS);
    if (FAIL_MS > 0) await runFailingKey(ctx, key, run, { keys: FAIL_KEYS, failMs: FAIL_MS, gapMs: FAIL_GAP_MS, every: FAIL_EVERY });
  },
  report(results) {
    const all = results.filter((r) => r.scenario === 'ordered' && !r.skipped);
    const rs = all.filter((r) => r.figure !== 'failing-key');
    const fk = all.filter((r) => r.figure === 'failing-key');
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
      ...failingKeyTable(fk, json),
    ].join('\n');
    return { md, json: { ordered: json } };
  },
};

/** The failing-key figure's rows (one per run), and its keys in `json[system].failing_key`. */
function failingKeyTable(fk, json) {
  if (fk.length === 0) return [];
  const rows = fk.map((r) => {
    (json[r.system] ??= {}).failing_key = { baseline: r.baseline, failing: r.failing, other_p95_of_baseline: r.other_p95_of_baseline };
    const b = r.baseline;
    const f = r.failing;
    return (
      `| ${r.system} | ${r.run} | ${fmt(r.failing_keys)} | ${fmt(b.events)} | ${fmt(b.other_p95_ms, 1)} | ${fmt(f.other_p95_ms, 1)} | ` +
      `${fmt(r.other_p95_of_baseline, 2)}x | ${fmt(f.other_max_ms, 1)} | ${fmt(f.answered_500)} | ${fmt(b.load_1m, 1)} / ${fmt(f.load_1m, 1)} |`
    );
  });
  return [
    '',
    `#### One key failing (500 for ${fmt(fk[0].fail_ms / 1000)} s; one event in ${FAIL_EVERY} on it, every ${fk[0].gap_ms} ms)`,
    '',
    '| system | run | other keys | events per phase | other keys p95 ms, baseline | with the failing key | ratio | max ms, failing | 500s answered | load (1 min) baseline / failing |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    'Target (issue 29): a failing key delays only itself: the other keys p95 within 2x of the baseline.',
  ];
}
