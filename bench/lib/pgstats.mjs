// What a run cost PostgreSQL and the processes around it: CPU seconds from /proc (lib/proc.mjs),
// the WAL it wrote (bytes, full-page images, index entries, heap tuples; bench/README.md#postgresql-writes-per-job)
// and, with BENCH_PROFILE, the top statements of pg_stat_statements.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { PROFILE } from './env.mjs';
import { cpuSeconds, pgCpuSeconds } from './proc.mjs';
import { round } from './report.mjs';

/** In a cpuNow() spec, the key that stands for PostgreSQL (the postmaster and all its backends). */
export const POSTGRES = 'postgres';

/** CPU seconds so far of each process in `spec` ({name: pid, or POSTGRES}), keys in spec's order. */
export function cpuNow(server, spec) {
  return Object.fromEntries(
    Object.entries(spec).map(([k, pid]) => [k, pid === POSTGRES ? pgCpuSeconds(`${server.dir}/pg`) : cpuSeconds(pid)]),
  );
}

/** CPU seconds between two cpuNow() readings, to 0.01 s. */
export const cpuDelta = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, round(b[k] - a[k], 2)]));

/** The current WAL insert position: take one before and one after a measured window. */
export async function walMark(server) {
  return (await server.admin.query('select pg_current_wal_insert_lsn()::text as lsn')).rows[0].lsn;
}

// Index entries are read from the WAL: PostgreSQL counts no index inserts in its statistics views
// (pg_stat_user_indexes has scans and tuples read, pg_statio_user_indexes block reads and hits).
// Every index of the three systems is a B-tree. A leaf insert is one record, INSERT_LEAF or, into a
// posting list, INSERT_POST; one that splits its page travels in the split record (upper-level
// splits count too: they are rare).
const INDEX_ENTRY = new Set(['Btree/INSERT_LEAF', 'Btree/INSERT_POST', 'Btree/SPLIT_L', 'Btree/SPLIT_R']);
const HEAP = {
  'Heap/INSERT': 'insert',
  'Heap2/MULTI_INSERT': 'multi_insert',
  'Heap/UPDATE': 'update',
  'Heap/HOT_UPDATE': 'hot_update',
  'Heap/DELETE': 'delete',
};

/**
 * What the cluster wrote to the WAL between two walMark()s: bytes (the LSN difference, exact and
 * cheap), and, read back with pg_walinspect, records, full-page image bytes, index entries and heap
 * tuple writes by kind (a MULTI_INSERT record holds many tuples). Cluster-wide: autovacuum and
 * other databases count too, which is why the windows are kept to one run with nothing else on.
 */
export async function walWritten(server, from, to) {
  const bytes = Number((await server.admin.query('select pg_wal_lsn_diff($2, $1)::bigint as b', [from, to])).rows[0].b);
  const out = { wal_bytes: bytes };
  try {
    const r = await server.admin.query(
      `select "resource_manager/record_type" as k, count::bigint as n, fpi_size::bigint as fpi from pg_get_wal_stats($1, $2, true)`,
      [from, to],
    );
    let records = 0;
    let fpi = 0;
    let entries = 0;
    const heap = { insert: 0, multi_insert: 0, update: 0, hot_update: 0, delete: 0 };
    for (const { k, n, fpi: f } of r.rows) {
      const count = Number(n);
      records += count;
      fpi += Number(f);
      const kind = k.replace(/\+INIT$/, '');
      if (INDEX_ENTRY.has(kind)) entries += count;
      if (HEAP[kind]) heap[HEAP[kind]] += count;
    }
    Object.assign(out, { wal_records: records, wal_fpi_bytes: fpi, index_entries: entries, heap_records: heap });
  } catch (e) {
    out.wal_stats_error = e.message;
  }
  return out;
}

/** Per job: WAL bytes, records, FPI bytes and index entries from walWritten(), to 0.1. */
export function perJob(w, jobs) {
  if (!w || !jobs) return null;
  const f = (x) => (typeof x === 'number' ? round(x / jobs, 1) : null);
  return { wal_bytes: f(w.wal_bytes), wal_records: f(w.wal_records), wal_fpi_bytes: f(w.wal_fpi_bytes), index_entries: f(w.index_entries) };
}

// ---------------------------------------------------------------- BENCH_PROFILE only

export async function pgssReset(url) {
  if (!PROFILE) return;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('select pg_stat_statements_reset()').catch(() => undefined);
  await c.end();
}

/**
 * The top statements of the run's database into `<profDir>/<name>.pgss.json`; returns the
 * database's total execution time (ms) and calls since pgssReset, or null when not profiling.
 */
export async function pgssDump(url, name, profDir) {
  if (!PROFILE) return null;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query(`select calls, round(total_exec_time::numeric, 1) as total_ms, round(mean_exec_time::numeric, 3) as mean_ms,
        plans, round(total_plan_time::numeric, 1) as plan_ms, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, wal_records, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), 400) as query
      from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = current_database() order by total_exec_time + total_plan_time desc limit 40`);
    writeFileSync(join(profDir, `${name}.pgss.json`), JSON.stringify(r.rows, null, 2));
    const t =
      await c.query(`select coalesce(sum(total_exec_time), 0)::float8 as ms, coalesce(sum(total_plan_time), 0)::float8 as plan_ms, coalesce(sum(calls), 0)::bigint as calls
      from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = current_database()`);
    return { total_exec_ms: round(t.rows[0].ms, 1), total_plan_ms: round(t.rows[0].plan_ms, 1), calls: Number(t.rows[0].calls) };
  } finally {
    await c.end();
  }
}

/**
 * The database's activity counters so far (pg_stat_database: transactions, tuples returned and
 * fetched, buffers hit and read; pg_stat_user_tables by table, a partition under its parent:
 * sequential and index scans and the rows they read). Take one before and one after a window and
 * subtract with activityDelta(): where two databases write the same per job (the WAL) but differ in
 * CPU per job, this says which reads differ. The counters are flushed by each backend at most once
 * a second and when it exits, so read the second one after the worker's connections are gone.
 */
export async function dbActivity(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const d = (
      await c.query(`select xact_commit::float8 as commits, xact_rollback::float8 as rollbacks, tup_returned::float8 as tup_returned,
          tup_fetched::float8 as tup_fetched, blks_hit::float8 as blks_hit, blks_read::float8 as blks_read
        from pg_stat_database where datname = current_database()`)
    ).rows[0];
    const t = await c.query(`select coalesce(p.relname, s.relname) as rel, sum(s.seq_scan)::float8 as seq_scan,
          sum(s.seq_tup_read)::float8 as seq_tup_read, sum(coalesce(s.idx_scan, 0))::float8 as idx_scan,
          sum(coalesce(s.idx_tup_fetch, 0))::float8 as idx_tup_fetch
        from pg_stat_user_tables s left join pg_inherits i on i.inhrelid = s.relid left join pg_class p on p.oid = i.inhparent
       group by 1`);
    return { db: d, tables: Object.fromEntries(t.rows.map(({ rel, ...rest }) => [rel, rest])) };
  } finally {
    await c.end();
  }
}

/** Two dbActivity() readings subtracted, per job (to 0.01); tables with no scan in between left out. */
export function activityDelta(a, b, jobs) {
  if (!a || !b || !jobs) return null;
  const per = (x, y) => Object.fromEntries(Object.keys(y).map((k) => [k, round(((y[k] ?? 0) - (x?.[k] ?? 0)) / jobs, 2)]));
  const tables = {};
  for (const [rel, v] of Object.entries(b.tables)) {
    const d = per(a.tables[rel], v);
    if (d.seq_scan || d.idx_scan) tables[rel] = d;
  }
  return { db: per(a.db, b.db), tables };
}
