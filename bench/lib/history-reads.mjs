// The history scenario's operator reads (bench/README.md#history-at-volume): GET requests to a
// `serve` child on a fresh copy of the history template, through HTTP as the dashboard makes
// them, each timed over `calls` sequential calls on one keep-alive connection after one warm-up.
import { loadavg } from 'node:os';
import pg from 'pg';
import { percentile, wallNow } from './common.mjs';
import { dist } from './dist.mjs';
import { cpuNow, POSTGRES } from './pgstats.mjs';
import { round } from './report.mjs';
import { VIEWER_TOKEN } from '../systems/acw.mjs';

/**
 * The counters (per-minute rows the stats and endpoints reads add up) moved forward by the time
 * since the template was loaded, so that a template loaded days ago still shows the last hour and
 * day as busy as when it was loaded. Through a copy: an update in place would meet keys not yet moved.
 */
export async function shiftCounters(url, loadedAtMs) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const shift = `(date_bin('1 minute', now(), timestamptz 'epoch') - date_bin('1 minute', to_timestamp(${Number(loadedAtMs)}::float8 / 1000), timestamptz 'epoch'))`;
    const move = async (table, columns, shifted) => {
      if (!(await c.query(`select to_regclass($1) is not null as h`, [table])).rows[0].h) return;
      await c.query('begin');
      await c.query(`create temp table moved on commit drop as select * from ${table}`);
      await c.query(`truncate ${table}`);
      await c.query(
        `insert into ${table} (${columns.join(', ')}) select ${columns.map((k) => (shifted.includes(k) ? `${k} + ${shift}` : k)).join(', ')} from moved`,
      );
      await c.query('commit');
    };
    await move(
      'delivery_stats',
      ['minute', 'endpoint', 'slot', 'ok', 'failed', 'permanent', 'buckets', 'last_at', 'last_error', 'last_error_at'],
      ['minute', 'last_at', 'last_error_at'],
    );
    await move('job_counts', ['minute', 'slot', 'completed', 'dead', 'cancelled'], ['minute']);
    // Builds before the history layout kept one count per minute and slot.
    await move('delivery_counts', ['minute', 'slot', 'ok', 'failed'], ['minute']);
    await c.query('analyze');
  } finally {
    await c.end();
  }
}

/**
 * The service's counter rollup (`stats_rollup`), run once to the end on a copy: the template holds
 * the counters as ten pooled writers leave them, one row per endpoint, minute and slot, where a
 * running service folds each settled minute into one row. Then `vacuum full` of the two tables: a
 * service that folds every minute never holds more than a few minutes of slot rows, so its table
 * stays near its folded size, where this one-off fold of a week leaves nine rows in ten dead (see
 * bench/README.md#history-at-volume). Returns the fold's seconds and rows folded, and the
 * vacuum's seconds, or null for a build that has no rollup (its reads then add up every slot row).
 */
export async function rollupCopy(url) {
  let mod;
  try {
    mod = await dist('history/stats-rollup.js');
  } catch {
    return null;
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const t = performance.now();
    const r = await mod.rollupCounters(c);
    const seconds = round((performance.now() - t) / 1000, 1);
    const t2 = performance.now();
    await c.query('vacuum (full, analyze) delivery_stats, job_counts');
    const vacuum_s = round((performance.now() - t2) / 1000, 1);
    return { seconds, delivery_stats: r.delivery_stats, job_counts: r.job_counts, statements: r.statements, vacuum_s };
  } finally {
    await c.end();
  }
}

/** Up to `n` finished jobs picked at random pages of the history: ids for job detail, and keyset cursors deep in the list. */
async function samples(url, n) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const table = (await c.query(`select to_regclass('job_history') is not null as h`)).rows[0].h ? 'job_history' : 'jobs';
    const r = await c.query(
      `select id::text as id, (extract(epoch from created_at) * 1000000)::bigint::text as us from ${table} tablesample system (1) limit 5000`,
    );
    const rows = r.rows.toSorted(() => Math.random() - 0.5).slice(0, n);
    return rows.map((x) => ({ id: x.id, cursor: Buffer.from(`${x.us}|${x.id}`, 'utf8').toString('base64url') }));
  } finally {
    await c.end();
  }
}

/** The reads, each a name and the path of call i (0 is the warm-up); `ctx` holds the cursors and ids. */
function reads(s) {
  const list = [
    ['stats 1h', () => '/v1/stats?window=1h'],
    ['stats 24h', () => '/v1/stats?window=24h'],
    ['endpoints', () => '/v1/endpoints'],
    ['alerts', () => '/v1/alerts'],
  ];
  for (const [name, q] of [
    ['jobs', ''],
    ['jobs status=dead', 'status=dead'],
    ['jobs endpoint=e003', 'endpoint=e003'],
    ['jobs topic=order.refunded', 'topic=order.refunded'],
  ]) {
    const sep = q ? '&' : '';
    list.push([`${name}, first page`, () => `/v1/jobs${q ? `?${q}` : ''}`]);
    list.push([`${name}, page 5`, () => `/v1/jobs?${q}${sep}cursor=${s.page5[name]}`]);
  }
  list.push(['jobs, random cursor', (i) => `/v1/jobs?cursor=${s.picks[i % s.picks.length].cursor}`]);
  list.push(['job detail, random id', (i) => `/v1/jobs/${s.picks[i % s.picks.length].id}`]);
  return list;
}

/**
 * One run of the reads against a `serve` child (jobs off, API only: no runner or worker beside
 * the reads) on `url`. Emits one result per read: p50 / p95 / max over `calls`, and the serve
 * child's and PostgreSQL's CPU per call.
 */
export async function runReads(ctx, { server, url, run, calls, fields }) {
  const { Pool } = await import('undici');
  const picks = await samples(url, calls + 1);
  const c = ctx.workerChild(
    {
      system: 'acw',
      variant: 'default',
      mode: 'history',
      url,
      receiverUrl: ctx.receiver.url,
      target: Infinity,
      http: true,
      jobs: false,
      operator: true,
    },
    `acw-history-reads-${run}`,
  );
  try {
    await c.wait('loaded', 60_000);
    c.send({ cmd: 'go' });
    const { httpUrl } = await c.wait('started', 120_000);
    const http = new Pool(httpUrl, { connections: 1, pipelining: 1 });
    const get = async (path) => {
      const t = wallNow();
      const res = await http.request({ path, method: 'GET', headers: { authorization: `Bearer ${VIEWER_TOKEN}` } });
      const text = await res.body.text();
      const ms = wallNow() - t;
      if (res.statusCode !== 200) throw new Error(`GET ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
      return { ms, body: JSON.parse(text) };
    };
    try {
      // The cursor of page 5 of each list, walked once.
      const page5 = {};
      for (const [name, q] of [
        ['jobs', ''],
        ['jobs status=dead', 'status=dead'],
        ['jobs endpoint=e003', 'endpoint=e003'],
        ['jobs topic=order.refunded', 'topic=order.refunded'],
      ]) {
        let cursor = null;
        for (let p = 1; p < 5; p++) {
          const path = `/v1/jobs?${q}${q && cursor ? '&' : ''}${cursor ? `cursor=${cursor}` : ''}`;
          cursor = (await get(path)).body.next_cursor;
          if (!cursor) throw new Error(`${name}: fewer than 5 pages`);
        }
        page5[name] = cursor;
      }
      const out = [];
      for (const [name, path] of reads({ page5, picks })) {
        const warm = await get(path(calls));
        const times = [];
        const cpu0 = cpuNow(server, { serve: c.pid, pg: POSTGRES });
        const load0 = loadavg()[0];
        let last = warm;
        for (let i = 0; i < calls; i++) {
          last = await get(path(i));
          times.push(last.ms);
        }
        const cpu1 = cpuNow(server, { serve: c.pid, pg: POSTGRES });
        times.sort((a, b) => a - b);
        const r = {
          scenario: 'history',
          phase: 'reads',
          run,
          ...fields,
          read: name,
          path: path(0)
            .replace(/cursor=[\w-]+/, 'cursor=…')
            .replace(/[0-9a-f-]{36}$/, ':id'),
          calls,
          p50_ms: round(percentile(times, 50), 2),
          p95_ms: round(percentile(times, 95), 2),
          max_ms: round(times.at(-1), 2),
          load_1m: round(load0, 2),
          items: Array.isArray(last.body.items) ? last.body.items.length : undefined,
          cpu_ms_per_call: {
            serve: round(((cpu1.serve - cpu0.serve) * 1000) / calls, 2),
            pg: round(((cpu1.pg - cpu0.pg) * 1000) / calls, 2),
          },
        };
        ctx.emit(r);
        out.push(r);
      }
      return out;
    } finally {
      await http.close();
    }
  } finally {
    await ctx.stopChild(c);
  }
}
