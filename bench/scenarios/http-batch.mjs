// http-batch: BENCH_HTTP_BATCH_EVENTS events through POST /v1/notify/batch, BENCH_HTTP_BATCH_SIZES
// events a request, one request at a time, to a `serve` with jobs off (one endpoint matches each
// event: an event row and a job row each), against graphile-worker's addJobs in batches of the same
// size from here. Per run and size, acw first, then graphile, so the two meet the same load on the
// shared box (bench/README.md#http-entry-point).
import pg from 'pg';
import { HTTP_BATCH, httpMeta } from '../lib/env.mjs';
import { cpuNow, POSTGRES } from '../lib/pgstats.mjs';
import { round } from '../lib/report.mjs';
import { startServe } from '../lib/serve.mjs';
import { httpReport } from '../reports/http.mjs';
import { acw, graphile } from '../systems/index.mjs';

const perEvent = (cpu, n) => Object.fromEntries(Object.entries(cpu).map(([k, s]) => [k, round((s * 1e6) / n, 0)]));

async function runAcw(ctx, size, run) {
  const { server } = ctx;
  const n = HTTP_BATCH.events;
  ctx.note(`http-batch run ${run}: acw-default, ${size} a request`);
  const db = `b_http_batch_acw_${size}_${run}`;
  const url = await server.createDatabase(db, await ctx.template('acw-default', false));
  const { c, httpUrl } = await startServe(ctx, url, `acw-http-batch-${size}-${run}`);
  const http = await acw.openHttp(httpUrl);
  try {
    await http.batch(n, n + 1); // warm-up: auth, prepared statements, the connection
    await server.checkpoint();
    const cpu0 = cpuNow(server, { api: c.pid, pg: POSTGRES });
    const t0 = performance.now();
    for (let i = 0; i < n; i += size) await http.batch(i, Math.min(n, i + size));
    const ms = performance.now() - t0;
    const cpu1 = cpuNow(server, { api: c.pid, pg: POSTGRES });
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const rows = await check
      .query(`select (select count(*)::int from events) as events, (select count(*)::int from jobs) as jobs`)
      .finally(() => check.end());
    ctx.emit({
      scenario: 'http-batch',
      system: 'acw-default',
      label: 'acw-webhooks POST /v1/notify/batch',
      run,
      batch: size,
      events: n,
      seconds: round(ms / 1000, 3),
      events_per_s: round(n / (ms / 1000), 0),
      cpu_us_per_event: perEvent({ api: cpu1.api - cpu0.api, pg: cpu1.pg - cpu0.pg }, n),
      written: rows.rows[0],
    });
  } finally {
    await http.close().catch(() => undefined);
    await ctx.stopChild(c);
    await server.dropDatabase(db);
  }
}

async function runGraphile(ctx, size, run) {
  const { server } = ctx;
  const n = HTTP_BATCH.events;
  ctx.note(`http-batch run ${run}: graphile addJobs, ${size} a call`);
  const db = `b_http_batch_graphile_${size}_${run}`;
  const url = await server.createDatabase(db, await ctx.template('graphile-tuned', false));
  try {
    await server.checkpoint();
    const cpu0 = cpuNow(server, { pg: POSTGRES });
    const enq = await graphile.enqueue(url, { mode: 'deliver', n, batch: size });
    const cpu1 = cpuNow(server, { pg: POSTGRES });
    ctx.emit({
      scenario: 'http-batch',
      system: 'graphile-tuned',
      label: 'graphile-worker addJobs',
      run,
      batch: size,
      events: n,
      seconds: round(enq.ms / 1000, 3),
      events_per_s: round(n / (enq.ms / 1000), 0),
      cpu_us_per_event: perEvent({ pg: cpu1.pg - cpu0.pg }, n),
    });
  } finally {
    await server.dropDatabase(db);
  }
}

async function runBatch(ctx, _key, run) {
  for (const size of HTTP_BATCH.sizes) {
    if (ctx.only.includes('acw-default')) await runAcw(ctx, size, run);
    if (ctx.only.some((k) => k.startsWith('graphile'))) await runGraphile(ctx, size, run);
  }
}

export default { name: 'http-batch', run: runBatch, report: httpReport, meta: httpMeta };
