// http-rps: POST /v1/notify from BENCH_HTTP_RPS_CLIENTS concurrent keep-alive clients (each one
// request at a time) against one `serve` with jobs off, for BENCH_HTTP_RPS_SECONDS after a 1 s
// warm-up (bench/README.md#http-entry-point). Reported, no target.
import { wallNow } from '../lib/common.mjs';
import { HTTP_RPS, httpMeta } from '../lib/env.mjs';
import { cpuNow, POSTGRES } from '../lib/pgstats.mjs';
import { percentile, round } from '../lib/report.mjs';
import { startServe } from '../lib/serve.mjs';
import { httpReport } from '../reports/http.mjs';
import { acw } from '../systems/index.mjs';

async function runRps(ctx, _key, run) {
  const { server } = ctx;
  if (!ctx.only.includes('acw-default')) return;
  ctx.note(`http-rps run ${run}: ${HTTP_RPS.clients} clients for ${HTTP_RPS.seconds} s`);
  const db = `b_http_rps_${run}`;
  const url = await server.createDatabase(db, await ctx.template('acw-default', false));
  const { c, httpUrl } = await startServe(ctx, url, `acw-http-rps-${run}`);
  const http = await acw.openHttp(httpUrl, { connections: HTTP_RPS.clients });
  try {
    let seq = 0;
    const drive = async (until, lat) => {
      await Promise.all(
        Array.from({ length: HTTP_RPS.clients }, async () => {
          while (wallNow() < until) {
            const t = wallNow();
            await http.notify(seq++);
            lat?.push(wallNow() - t);
          }
        }),
      );
    };
    await drive(wallNow() + 1_000, null);
    const procs = { api: c.pid, pg: POSTGRES };
    const cpu0 = cpuNow(server, procs);
    const lat = [];
    const t0 = wallNow();
    await drive(t0 + HTTP_RPS.seconds * 1000, lat);
    const seconds = (wallNow() - t0) / 1000;
    const cpu1 = cpuNow(server, procs);
    lat.sort((a, b) => a - b);
    ctx.emit({
      scenario: 'http-rps',
      system: 'acw-default',
      label: 'acw-webhooks POST /v1/notify',
      run,
      clients: HTTP_RPS.clients,
      seconds: round(seconds, 2),
      requests: lat.length,
      requests_per_s: round(lat.length / seconds, 0),
      p50_ms: round(percentile(lat, 50), 2),
      p99_ms: round(percentile(lat, 99), 2),
      cpu_us_per_request: {
        api: round(((cpu1.api - cpu0.api) * 1e6) / lat.length, 0),
        pg: round(((cpu1.pg - cpu0.pg) * 1e6) / lat.length, 0),
      },
    });
  } finally {
    await http.close().catch(() => undefined);
    await ctx.stopChild(c);
    await server.dropDatabase(db);
  }
}

export default { name: 'http-rps', run: runRps, report: httpReport, meta: httpMeta };
