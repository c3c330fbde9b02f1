// The history scenario's PostgreSQL (bench/README.md#history-at-volume): a server of its own at
// PostgreSQL's default memory settings, on a data directory kept between invocations under
// bench/.cache/, holding the template database with BENCH_HISTORY_ROWS finished deliveries. The
// directory is keyed by the build's migrations, the loader (lib/history-data.mjs) and the row
// count, so a changed layout or loader loads afresh; a load that did not finish is redone.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { dist, distUrl } from './dist.mjs';
import { loadFinished } from './history-data.mjs';
import { DEFAULT_MEMORY_SETTINGS, startServer } from './pg.mjs';

const CACHE = fileURLToPath(new URL('../.cache/', import.meta.url));
const LOADER = fileURLToPath(new URL('./history-data.mjs', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const DAY_MS = 86_400_000;

export const TEMPLATE = 'tpl_history';
export const EMPTY = 'tpl_history_empty';

/** sha256 over the build's migrations (beside its dist/), the loader's and this file's source, and the row count. */
function cacheKey(rows) {
  const h = createHash('sha256');
  const migrations = fileURLToPath(new URL('../migrations/', distUrl()));
  for (const f of readdirSync(migrations).toSorted()) h.update(f).update(readFileSync(join(migrations, f)));
  h.update(readFileSync(LOADER)).update(readFileSync(SELF)).update(String(rows));
  return h.digest('hex').slice(0, 12);
}

/**
 * Templates of other keys, but the most recently used one (so that two builds compared turn about
 * do not reload each time), unless a server still runs there (another invocation uses it).
 */
function removeStale(keep, note) {
  if (!existsSync(CACHE)) return;
  const used = (d) => statSync(join(CACHE, d, 'template.json'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const others = readdirSync(CACHE)
    .filter((d) => d.startsWith('history-') && d !== keep)
    .toSorted((a, b) => used(b) - used(a));
  for (const d of others.slice(1)) {
    const pidFile = join(CACHE, d, 'pg', 'postmaster.pid');
    if (existsSync(pidFile)) {
      try {
        process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 0);
        note(`history: ${d} is in use, left alone`);
        continue;
      } catch {
        // not running
      }
    }
    note(`history: removing the template ${d} (another build's or size's)`);
    rmSync(join(CACHE, d), { recursive: true, force: true });
  }
}

/** Sizes of the history's tables in `url`'s database: per table heap, toast and maps, indexes; and the database. */
export async function historySizes(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { h, p } = (await c.query(`select to_regclass('job_history') is not null as h, to_regclass('event_log') is not null as p`))
      .rows[0];
    const events = p ? 'event_log' : 'events';
    const tables = h ? ['job_history', 'job_attempts', events] : ['jobs', 'webhook_attempts', events];
    // A plain table is its own one leaf (pg_partition_tree has no row for it).
    const r = await c.query(
      `with leaves as (
         select t.name, coalesce(p.relid, t.name::regclass) as relid
           from unnest($1::text[]) t(name)
           left join lateral (select relid from pg_partition_tree(t.name::regclass) where isleaf) p on true)
       select name, coalesce(sum(pg_relation_size(relid, 'main')), 0)::float8 as heap,
              coalesce(sum(pg_table_size(relid) - pg_relation_size(relid, 'main')), 0)::float8 as toast,
              coalesce(sum(pg_indexes_size(relid)), 0)::float8 as indexes, count(*)::int as partitions
         from leaves group by name order by name`,
      [tables],
    );
    const db = (await c.query(`select pg_database_size(current_database())::float8 as b`)).rows[0].b;
    return { tables: Object.fromEntries(r.rows.map(({ name, ...rest }) => [name, rest])), database_bytes: db };
  } finally {
    await c.end();
  }
}

/**
 * Start the history server on its cached directory and make sure the template is loaded: returns
 * { server, template, empty, info } where info says how the template was made (rows, load and
 * vacuum seconds, when, its size) and whether this invocation loaded it.
 */
export async function openHistory({ rows, deadEvery, note }) {
  const key = `history-${rows}-${cacheKey(rows)}`;
  removeStale(key, note);
  const dir = join(CACHE, key);
  mkdirSync(dir, { recursive: true });
  const server = await startServer({ dir, settings: DEFAULT_MEMORY_SETTINGS });
  note(`history: PostgreSQL ${server.version} on ${dir}; ${JSON.stringify(server.settings)}`);
  await server.admin.query('create extension if not exists pg_walinspect').catch((e) => note('pg_walinspect unavailable:', e.message));
  const marker = join(dir, 'template.json');
  let info;
  if (existsSync(marker)) {
    info = { ...JSON.parse(readFileSync(marker, 'utf8')), cached: true };
    const now = new Date();
    utimesSync(marker, now, now);
    note(`history: template of ${rows} deliveries loaded ${info.loaded_at}, reused`);
  } else {
    info = { ...(await loadTemplate(server, { rows, deadEvery, note })), key, cached: false };
    writeFileSync(marker, `${JSON.stringify(info, null, 2)}\n`);
  }
  // The empty database of the same server, migrated only: made each invocation (seconds).
  await migrated(server, EMPTY);
  return { server, template: TEMPLATE, empty: EMPTY, info };
}

async function migrated(server, name) {
  const url = await server.createDatabase(name);
  const { migrate } = await dist('db/migrate.js');
  const { createPool } = await dist('db/pool.js');
  const pool = createPool({ url, size: 1, schema: 'public' });
  try {
    await migrate(pool, { schema: 'public' });
  } finally {
    await pool.end();
  }
  return { url };
}

/**
 * The template: migrated, then `rows` finished deliveries from the start of the UTC day 7 days ago
 * until now (so each of the 7 full days past holds a whole day's partitions), their counters
 * folded as the `stats_rollup` runner would have done over that week, then
 * `vacuum (freeze, analyze)` and a checkpoint. Without the fold, the runner of the service under
 * test folds the template's week of counters during the drain on the history database, and the
 * drain measures that instead of the deliveries.
 */
async function loadTemplate(server, { rows, deadEvery, note }) {
  note(`history: loading ${rows} finished deliveries into ${TEMPLATE} (once per machine and layout)`);
  const { url } = await migrated(server, TEMPLATE);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const now = (await c.query(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0].ms;
    const fromMs = Math.floor(now / DAY_MS) * DAY_MS - 7 * DAY_MS;
    const t0 = performance.now();
    let last = t0;
    const layout = await loadFinished(c, {
      rows,
      fromMs,
      toMs: now,
      deadEvery,
      onBatch: (n) => {
        if (performance.now() - last > 30_000 || n === rows) {
          last = performance.now();
          note(`history: ${n} of ${rows} loaded, ${((last - t0) / 1000).toFixed(0)} s`);
        }
      },
    });
    const loadS = (performance.now() - t0) / 1000;
    const rollup = await rollupCounters(c);
    if (rollup) note(`history: counters folded in ${rollup.seconds} s (${rollup.delivery_stats} + ${rollup.job_counts} slot rows)`);
    const t1 = performance.now();
    await c.query(`set maintenance_work_mem = '512MB'`);
    await c.query('vacuum (freeze, analyze)');
    const vacuumS = (performance.now() - t1) / 1000;
    await server.checkpoint();
    const sizes = await historySizes(url);
    note(
      `history: loaded in ${loadS.toFixed(0)} s, vacuumed in ${vacuumS.toFixed(0)} s, ${(sizes.database_bytes / 2 ** 30).toFixed(2)} GiB`,
    );
    return {
      rows,
      layout,
      dead_every: deadEvery,
      from: new Date(fromMs).toISOString(),
      loaded_at: new Date(now).toISOString(),
      load_s: Math.round(loadS * 10) / 10,
      vacuum_s: Math.round(vacuumS * 10) / 10,
      rollup,
      sizes,
    };
  } finally {
    await c.end();
  }
}

/** Fold the counters as the build's `stats_rollup` runner does, if the build has one (older builds do not). */
async function rollupCounters(c) {
  let mod;
  try {
    mod = await dist('history/stats-rollup.js');
  } catch {
    return null;
  }
  const t = performance.now();
  const r = await mod.rollupCounters(c);
  return { seconds: Math.round((performance.now() - t) / 100) / 10, delivery_stats: r.delivery_stats, job_counts: r.job_counts };
}
