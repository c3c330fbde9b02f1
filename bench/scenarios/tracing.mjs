// tracing: acw-default's deliver (1 ms receiver) and POST /v1/notify latency with tracing off, at
// 100% sampling and at 1%, exporting over OTLP/HTTP (protobuf) to a receiver on 127.0.0.1 that this
// process keeps (bench/README.md#tracing). The modes of one run go back to back, so the ratios to
// "off" are taken under the same load. The children read the OTEL_* variables (systems/acw.mjs).
import { createServer } from 'node:http';
import { runLatency } from '../lib/latency.mjs';
import { fmt, medianWhere, perRun, ratio, round, rx } from '../lib/report.mjs';
import { runThroughput } from '../lib/throughput.mjs';

const MODES = (process.env.BENCH_TRACING_MODES ?? 'off,on,sampled').split(',').filter(Boolean);
const MEASURES = (process.env.BENCH_TRACING_MEASURES ?? 'deliver,http-latency').split(',').filter(Boolean);

/** The environment of each mode (unset: nothing of tracing). */
const ENV = {
  off: {},
  on: { OTEL_TRACES_SAMPLER: 'always_on' },
  sampled: { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
};

/** An OTLP/HTTP receiver that reads and counts what it is sent, and answers 200. */
async function otlpReceiver() {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c) => (bytes += c.length));
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    take: () => {
      const s = { requests, bytes };
      requests = 0;
      bytes = 0;
      return s;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

const is = (measure, mode) => (r) => r.measure === measure && r.tracing === mode;
/** The worker's CPU per delivery, in µs. */
const cpuPerJob = (r) => ((r.cpu_s?.worker ?? null) === null ? null : (r.cpu_s.worker / (r.handled_before_timeout ?? r.jobs)) * 1e6);

function withEnv(vars) {
  const keys = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG'];
  const before = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
  for (const k of keys) delete process.env[k];
  Object.assign(process.env, vars);
  return () => {
    for (const k of keys) {
      if (before[k] === undefined) delete process.env[k];
      else process.env[k] = before[k];
    }
  };
}

export default {
  name: 'tracing',
  systems: ['acw-default'],
  async run(ctx, key, run) {
    const otlp = await otlpReceiver();
    try {
      for (const measure of MEASURES) {
        for (const mode of MODES) {
          const restore = withEnv(
            mode === 'off' ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', ...ENV[mode] },
          );
          otlp.take();
          const sub = {
            ...ctx,
            emit: (r) => ctx.emit({ ...r, scenario: 'tracing', measure: r.scenario, tracing: mode, otlp: otlp.take() }),
          };
          try {
            if (measure === 'deliver') await runThroughput(sub, 'deliver', key, run);
            else await runLatency(sub, key, 'http', run, 'http-latency');
          } finally {
            restore();
          }
        }
      }
    } finally {
      await otlp.close();
    }
  },
  report(results) {
    const rs = results.filter((r) => r.scenario === 'tracing' && !r.skipped);
    if (rs.length === 0) return { md: null, json: {} };
    const lines = [
      '| tracing | deliver jobs/s | vs off | worker CPU µs per delivery | added vs off | POST /v1/notify enqueue to arrival p50 / p99 ms | enqueue call p50 ms | p50 vs off | spans exported (OTLP requests, KiB) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ];
    const json = {};
    for (const mode of MODES) {
      const d = is('deliver', mode);
      const h = is('http-latency', mode);
      const rate = medianWhere(rs, d, 'jobs_per_s');
      const cpu = medianWhere(rs, d, cpuPerJob);
      const rateRatio = perRun(rs, d, is('deliver', 'off'), 'jobs_per_s', ratio);
      const added = mode === 'off' ? null : median2(rs, d, is('deliver', 'off'), cpuPerJob);
      const p50 = medianWhere(rs, h, 'p50_ms');
      const p99 = medianWhere(rs, h, 'p99_ms');
      const enq = medianWhere(rs, h, 'enqueue_p50_ms');
      const p50Ratio = perRun(rs, h, is('http-latency', 'off'), 'p50_ms', ratio);
      const reqs = medianWhere(
        rs,
        (r) => r.tracing === mode,
        (r) => r.otlp?.requests ?? 0,
      );
      const kib = medianWhere(
        rs,
        (r) => r.tracing === mode,
        (r) => (r.otlp?.bytes ?? 0) / 1024,
      );
      lines.push(
        `| ${mode === 'off' ? 'off' : mode === 'on' ? 'on, 100%' : 'on, 1%'} | ${fmt(rate)} | ${mode === 'off' ? '' : rx(rateRatio)} | ${fmt(cpu)} | ${added === null ? '' : `${added >= 0 ? '+' : ''}${fmt(added)}`} | ${fmt(p50, 1)} / ${fmt(p99, 1)} | ${fmt(enq, 2)} | ${mode === 'off' ? '' : rx(p50Ratio)} | ${fmt(reqs)}, ${fmt(kib)} |`,
      );
      json[mode] = {
        deliver_jobs_per_s: rate,
        deliver_vs_off: round(rateRatio, 3),
        worker_cpu_us_per_delivery: round(cpu, 0),
        added_cpu_us_per_delivery: round(added, 0),
        http_p50_ms: p50,
        http_p99_ms: p99,
        http_enqueue_p50_ms: enq,
        http_p50_vs_off: round(p50Ratio, 3),
      };
    }
    return { md: `## Tracing\n\n${lines.join('\n')}\n`, json: { tracing: json } };
  },
  meta: () => ({ tracing_modes: MODES, tracing_measures: MEASURES }),
};

/** The median over runs of f(a) - f(off), within each run. */
function median2(rs, isA, isOff, f) {
  const runs = [...new Set(rs.filter(isA).map((r) => r.run))];
  const d = runs
    .map((run) => {
      const a = rs.find((r) => r.run === run && isA(r));
      const b = rs.find((r) => r.run === run && isOff(r));
      const x = a && f(a);
      const y = b && f(b);
      return x === null || y === null || x === undefined || y === undefined ? null : x - y;
    })
    .filter((x) => x !== null)
    .toSorted((a, b) => a - b);
  return d.length === 0 ? null : d[Math.floor(d.length / 2)];
}
