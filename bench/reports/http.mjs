// The HTTP entry point's section and issue 14's targets (http-batch, http-latency, http-rps),
// medians over runs; acw and graphile-worker are compared run by run.
import { HTTP_RPS } from '../lib/env.mjs';
import { fmt, ge, medianWhere, perRun, ratio, rx } from '../lib/report.mjs';

const isAcw = (r) => r.system.startsWith('acw');
const isGraphileTuned = (r) => r.system === 'graphile-tuned';
const within = (scenario, f) => (r) => r.scenario === scenario && !r.skipped && f(r);
const latencyCell = (x) =>
  x.p50 === null ? 'n/a' : `${fmt(x.p50, 1)} / ${fmt(x.p95, 1)} / ${fmt(x.p99, 1)} (enqueue call ${fmt(x.enq, 1)})`;

/** The section's markdown, or null without its scenarios. */
export function httpSummary(rs) {
  const med = (f, field) => medianWhere(rs, f, field);
  const batch = rs.filter((r) => r.scenario === 'http-batch');
  const lat = rs.filter((r) => r.scenario === 'http-latency' && !r.skipped);
  const rps = rs.filter((r) => r.scenario === 'http-rps');
  if (batch.length + lat.length + rps.length === 0) return null;
  const lines = [];
  const goals = [];
  const add = (name, value, goal, ok) =>
    goals.push(`| ${name} | ${value} | ${goal} | ${ok === null ? 'not measured' : ok ? 'yes' : '**no**'} |`);
  if (batch.length) {
    lines.push(
      '| batch enqueue, events (jobs) per second, medians over runs | per request/call | acw-webhooks `POST /v1/notify/batch` | graphile-worker `addJobs` | ratio (median of per-run ratios) |',
    );
    lines.push('| --- | --- | --- | --- | --- |');
    for (const size of new Set(batch.map((r) => r.batch))) {
      const isA = within('http-batch', (r) => r.batch === size && r.system.startsWith('acw'));
      const isG = within('http-batch', (r) => r.batch === size && r.system.startsWith('graphile'));
      const a = med(isA, 'events_per_s');
      const g = med(isG, 'events_per_s');
      const q = perRun(rs, isA, isG, 'events_per_s', (x, y) => ratio(x, y));
      lines.push(`| | ${fmt(size)} | ${fmt(a)} | ${fmt(g)} | ${rx(q)} |`);
      add(`HTTP batch of ${fmt(size)} >= 0.6x addJobs (median of per-run ratios)`, rx(q), '>= 0.60x', ge(q, 0.6));
    }
    lines.push('');
  }
  if (lat.length) {
    const of = (f) => ({
      p50: med(within('http-latency', f), 'p50_ms'),
      p95: med(within('http-latency', f), 'p95_ms'),
      p99: med(within('http-latency', f), 'p99_ms'),
      enq: med(within('http-latency', f), 'enqueue_p50_ms'),
    });
    const a = of(isAcw);
    const g = of(isGraphileTuned);
    const gd = of((r) => r.system === 'graphile-default');
    lines.push(
      '| enqueue to arrival, ms p50 / p95 / p99, medians over runs | acw-webhooks `POST /v1/notify` to `serve`, separate `worker` | graphile-worker tuned `addJob` | graphile-worker default `addJob` |',
    );
    lines.push('| --- | --- | --- | --- |');
    lines.push(`| | ${latencyCell(a)} | ${latencyCell(g)} | ${latencyCell(gd)} |`);
    lines.push('');
    const isA = within('http-latency', isAcw);
    const isG = within('http-latency', isGraphileTuned);
    const d50 = perRun(rs, isA, isG, 'p50_ms', (x, y) => x - y);
    const r99 = perRun(rs, isA, isG, 'p99_ms', (x, y) => ratio(x, y));
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

/** The section of latest.md (null without its scenarios); nothing of its own in latest.json. */
export function httpReport(results) {
  const md = httpSummary(results);
  return { md: md ? `## HTTP entry point\n\n${md}` : null, json: {} };
}
