// `node bench/history-explain.mjs [N]`: EXPLAIN (ANALYZE, BUFFERS) of every statement behind the
// history scenario's operator reads (bench/README.md#history-at-volume), on a copy of its cached
// template of N finished deliveries (BENCH_HISTORY_ROWS by default; the history scenario must have
// loaded it with this build's migrations), its counters moved forward and rolled up as the scenario does. The statements are captured from acw's own functions in
// dist (queueCounts, deliveryBuckets, deliveryHealth, readEndpointStates, listJobs, getJob,
// listAlerts), so they are always the current SQL. Each runs with its parameters as a custom plan,
// and the named prepared ones also as PostgreSQL's generic plan (what node-pg gets after five
// executions). Run it while no benchmark uses the template's server.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { dist } from './lib/dist.mjs';
import { HISTORY_ENDPOINTS } from './lib/history-data.mjs';
import { rollupCopy, shiftCounters } from './lib/history-reads.mjs';
import { DEFAULT_MEMORY_SETTINGS, startServer } from './lib/pg.mjs';

const ROWS = Number(process.argv[2] ?? process.env.BENCH_HISTORY_ROWS ?? 5_000_000);
const CACHE = fileURLToPath(new URL('.cache/', import.meta.url));
const dir = existsSync(CACHE) ? readdirSync(CACHE).find((d) => d.startsWith(`history-${ROWS}-`)) : undefined;
if (!dir) throw new Error(`no history template of ${ROWS} deliveries under ${CACHE}: run the history scenario first`);

const { queueCounts, deliveryBuckets, deliveryHealth } = await dist('history/stats.js');
const { readEndpointStates } = await dist('endpoint-state/health.js');
const { listJobs, getJob } = await dist('admin/jobs.js');
const { listAlerts } = await dist('admin/alerts.js');

function literal(client, v) {
  if (v === null || v === undefined) return 'null';
  if (v instanceof Date) return client.escapeLiteral(v.toISOString());
  if (Array.isArray(v))
    return client.escapeLiteral(`{${v.map((x) => (x === null ? 'NULL' : `"${String(x).replace(/["\\]/g, '\\$&')}"`)).join(',')}}`);
  return client.escapeLiteral(String(v));
}

/** A Queryable that explains each statement (custom, and generic when it is named), then runs it. */
function explaining(client, label) {
  return {
    async query(cfg, values) {
      const text = typeof cfg === 'string' ? cfg : cfg.text;
      const vals = (typeof cfg === 'string' ? values : cfg.values) ?? [];
      const custom = await client.query({ text: `explain (analyze, buffers) ${text}`, values: vals });
      console.log(`\n### ${label}${cfg.name ? ` (${cfg.name})` : ''}\n\n${text.replace(/\s+/g, ' ').slice(0, 600)}\n`);
      console.log(custom.rows.map((r) => r['QUERY PLAN']).join('\n'));
      if (cfg.name) {
        await client.query('set plan_cache_mode = force_generic_plan');
        await client.query({ text: `prepare bench_generic as ${text}` });
        // EXECUTE takes no bind parameters: its arguments go as literals, typed by the prepared statement.
        const args = vals.map((v) => literal(client, v));
        const generic = await client.query(`explain (analyze, buffers) execute bench_generic${args.length ? `(${args.join(', ')})` : ''}`);
        console.log(`\ngeneric plan:\n${generic.rows.map((r) => r['QUERY PLAN']).join('\n')}`);
        await client.query('deallocate bench_generic');
        await client.query('reset plan_cache_mode');
      }
      return client.query({ text, values: vals });
    },
  };
}

const server = await startServer({ dir: join(CACHE, dir), settings: DEFAULT_MEMORY_SETTINGS });
const db = 'explain_history';
try {
  const url = await server.createDatabase(db, 'tpl_history', { strategy: 'file_copy' });
  const info = JSON.parse(readFileSync(join(CACHE, dir, 'template.json'), 'utf8'));
  await shiftCounters(url, Date.parse(info.loaded_at));
  const rollup = await rollupCopy(url);
  if (rollup) console.log(`counters rolled up as the service's stats_rollup does: ${JSON.stringify(rollup)}`);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const q = (label) => explaining(c, label);
    await queueCounts(q('GET /v1/stats: queueCounts'));
    await q('GET /v1/stats: oldest due').query(
      `select (select run_at from job_queue where status = 'pending' and run_at <= now() order by run_at, id limit 1) as run_at, now() as now`,
    );
    await deliveryBuckets(q('GET /v1/stats?window=1h: deliveryBuckets'), 3_600_000, 60);
    await deliveryBuckets(q('GET /v1/stats?window=24h: deliveryBuckets'), 86_400_000, 900);
    await deliveryHealth(q('GET /v1/endpoints: deliveryHealth'), HISTORY_ENDPOINTS, 60);
    await readEndpointStates(
      q('GET /v1/endpoints: readEndpointStates'),
      HISTORY_ENDPOINTS.map((name) => ({ name, enabled: true })),
    );
    await listAlerts(q('GET /v1/alerts'), {});
    const first = await listJobs(q('GET /v1/jobs'), {});
    for (const f of [{ status: 'dead' }, { endpoint: 'e003' }, { topic: 'order.refunded' }])
      await listJobs(q(`GET /v1/jobs ${JSON.stringify(f)}`), f);
    await listJobs(q('GET /v1/jobs, page 2'), { cursor: first.next_cursor });
    const old = (await c.query(`select id::text from job_history tablesample system (1) limit 1`)).rows[0]?.id ?? first.items[0].id;
    await getJob(q('GET /v1/jobs/:id'), old);
  } finally {
    await c.end();
  }
} finally {
  await server.dropDatabase(db).catch(() => undefined);
  await server.stop();
}
