// The main results table and its targets (issue 5): ceiling, deliver, noop, latency and backlog,
// one column per system, each cell a median over runs and its ratio to graphile-worker tuned.
import { RUN_TIMEOUT_S } from '../lib/env.mjs';
import { fmt, ge, medianWhere, pct, ratio, rx, targetsMarkdown } from '../lib/report.mjs';
import { median } from '../lib/common.mjs';
import { acw, ALL, label } from '../systems/index.mjs';

/** The concurrency of the no-queue HTTP ceiling: that of acw-webhooks tuned. */
export const CEILING_CONCURRENCY = acw.variants.tuned.workers;

const SCENARIOS = ['ceiling', 'deliver', 'noop', 'latency', 'backlog'];
const perJob = (r, x) => (x * 1e6) / (r.handled_before_timeout ?? r.jobs);

export function summarize(rs) {
  const med = (filter, field) => medianWhere(rs, filter, field);
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
    // PostgreSQL's writes per job (lib/pgstats.mjs), where the scenario recorded them.
    const writes = (scenario) => ({
      wal: m(scenario, (r) => r.pg_writes_per_job?.wal_bytes),
      fpi: m(scenario, (r) => r.pg_writes_per_job?.wal_fpi_bytes),
      index: m(scenario, (r) => r.pg_writes_per_job?.index_entries),
    });
    s[key] = {
      deliver: m('deliver', 'jobs_per_s'),
      timedOut: [...new Set(rs.filter((r) => r.system === key && r.timed_out).map((r) => r.scenario))],
      deliverEnqueue: m('deliver', 'enqueue_per_s'),
      deliverRss: m('deliver', 'peak_rss_mb'),
      deliverCpu: {
        worker: m('deliver', (r) => perJob(r, r.cpu_s.worker)),
        pg: m('deliver', (r) => perJob(r, r.cpu_s.pg)),
        receiver: m('deliver', (r) => perJob(r, r.cpu_s.receiver)),
      },
      deliverWrites: writes('deliver'),
      noop: m('noop', 'jobs_per_s'),
      noopEnqueue: m('noop', 'enqueue_per_s'),
      noopRss: m('noop', 'peak_rss_mb'),
      noopCpu: {
        worker: m('noop', (r) => perJob(r, r.cpu_s.worker)),
        pg: m('noop', (r) => perJob(r, r.cpu_s.pg)),
      },
      backlog: m('backlog', 'jobs_per_s'),
      backlogRss: m('backlog', 'peak_rss_mb'),
      backlogPgCpu: m('backlog', (r) => perJob(r, r.cpu_s.pg)),
      backlogWrites: writes('backlog'),
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

/** A median and, in brackets, its ratio to graphile-worker tuned (and `extra`). */
const cell = (v, refV, d = 0, extra = '') => (v === null ? 'n/a' : `${fmt(v, d)} (${rx(ratio(v, refV))}${extra})`);
const dagger = (x, scenario) => (x.timedOut.includes(scenario) ? ' †' : '');

export function latencyOf(sys) {
  return sys.latency.outbox ?? sys.latency.addJob ?? sys.latency.send ?? null;
}

/** "WAL bytes (of which full-page images) / index entries" per job, and PostgreSQL CPU µs when given. */
const writesCell = (w, pgCpu) =>
  w.wal === null ? 'n/a' : `${fmt(w.wal)} (${fmt(w.fpi)}) / ${fmt(w.index, 1)}${pgCpu === undefined ? '' : ` / ${fmt(pgCpu)}`}`;

export function markdown(sum, meta) {
  const { ceiling, systems: s } = sum;
  const ref = s['graphile-tuned'];
  const cols = ALL.filter((k) => Object.values(s[k]).some((v) => v !== null && !(typeof v === 'object' && Object.keys(v).length === 0)));
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
  if (ALL.some((k) => s[k].deliverWrites.wal !== null))
    row('deliver, PostgreSQL writes per job: WAL bytes (full-page images) / index entries', (x) => writesCell(x.deliverWrites));
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
  if (ALL.some((k) => s[k].backlogWrites.wal !== null))
    row('backlog, PostgreSQL per job: WAL bytes (full-page images) / index entries / CPU µs', (x) =>
      writesCell(x.backlogWrites, x.backlogPgCpu),
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
  return { list: t, markdown: targetsMarkdown(t) };
}

/** The section of latest.md (null when none of its scenarios ran) and its keys in latest.json. */
export function coreReport(results, meta) {
  const sum = summarize(results);
  const ran = results.some((r) => SCENARIOS.includes(r.scenario));
  const tg = ran ? targets(sum) : { list: [], markdown: '' };
  return {
    md: ran ? `${markdown(sum, meta)}\n\n## Targets\n\n${tg.markdown}` : null,
    json: { summary: sum, targets: tg.list },
  };
}
