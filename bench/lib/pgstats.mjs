// What a run cost PostgreSQL and the processes around it: CPU seconds from /proc (lib/proc.mjs)
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

// ---------------------------------------------------------------- BENCH_PROFILE only

export async function pgssReset(url) {
  if (!PROFILE) return;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('select pg_stat_statements_reset()').catch(() => undefined);
  await c.end();
}

/** The top statements of the run's database into `<profDir>/<name>.pgss.json` (BENCH_PROFILE only). */
export async function pgssDump(url, name, profDir) {
  if (!PROFILE) return;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query(`select calls, round(total_exec_time::numeric, 1) as total_ms, round(mean_exec_time::numeric, 3) as mean_ms,
        rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, wal_records, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), 400) as query
      from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = current_database() order by total_exec_time desc limit 25`);
    writeFileSync(join(profDir, `${name}.pgss.json`), JSON.stringify(r.rows, null, 2));
  } finally {
    await c.end();
  }
}
