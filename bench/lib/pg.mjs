// One embedded PostgreSQL for the whole benchmark (src/db/embedded.ts, in a temp dir), tuned
// modestly and identically for every system, and the few admin operations the runs need.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { AUTO_EXPLAIN_MS, autoExplainSettings } from './auto-explain.mjs';
import { dist } from './dist.mjs';

/**
 * Server settings, applied with ALTER SYSTEM and a restart, the same for every system. Memory is
 * left at PostgreSQL's defaults (shared_buffers 128 MB, work_mem 4 MB, maintenance_work_mem 64 MB,
 * effective_cache_size 4 GB), as our users run it; durability as shipped (fsync, synchronous_commit
 * and full_page_writes on): every system pays for its commits. The rest only keeps checkpoints out
 * of the measured windows and lets every system open its connections.
 */
export const SERVER_SETTINGS = {
  synchronous_commit: 'on',
  fsync: 'on',
  max_wal_size: '8GB',
  min_wal_size: '1GB',
  checkpoint_timeout: '30min',
  max_connections: '300',
};

export function withDatabase(url, db) {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** The history scenario's server (bench/README.md#history-at-volume): the same settings. */
export const DEFAULT_MEMORY_SETTINGS = SERVER_SETTINGS;

/**
 * Starts the embedded server with `settings`. `dir`: a data directory kept after stop (the history
 * scenario's cached template); by default a temp dir, removed at stop unless BENCH_KEEP is set.
 */
export async function startServer({ profile = false, dir: keptDir = null, settings: base = SERVER_SETTINGS } = {}) {
  const { startEmbeddedPostgres } = await dist('db/embedded.js');
  const dir = keptDir ?? mkdtempSync(join(tmpdir(), 'acw-bench-'));
  let handle = await startEmbeddedPostgres(dir);
  const settings = { ...base, ...autoExplainSettings() };
  const preload = [];
  if (profile) {
    // pg_stat_statements per run.
    preload.push('pg_stat_statements');
    settings['pg_stat_statements.track'] = 'all';
    settings['pg_stat_statements.max'] = '5000';
    // Planning too: a prepared statement that is planned at each execution (a custom plan) spends
    // CPU that total_exec_time does not count.
    settings['pg_stat_statements.track_planning'] = 'on';
  }
  // BENCH_AUTO_EXPLAIN: plans into the server's log, <cluster>/postgres.log (lib/auto-explain.mjs).
  if (AUTO_EXPLAIN_MS !== null) preload.push('auto_explain');
  if (preload.length > 0) settings.shared_preload_libraries = preload.join(',');
  const c = new pg.Client({ connectionString: handle.url });
  await c.connect();
  // A kept directory keeps its postgresql.auto.conf: settings it no longer names go back to the defaults.
  await c.query('alter system reset all');
  for (const [k, v] of Object.entries(settings)) {
    if (k === 'max_connections') continue; // given on the command line by embedded.ts
    // A list setting takes each element quoted on its own.
    await c.query(
      `alter system set ${k} = ${v
        .split(',')
        .map((x) => `'${x.trim()}'`)
        .join(', ')}`,
    );
  }
  await c.end();
  await handle.stop();
  handle = await startEmbeddedPostgres(dir);
  const admin = new pg.Client({ connectionString: handle.url });
  await admin.connect();
  const version = (await admin.query('show server_version')).rows[0].server_version;
  const effective = {};
  for (const k of [...Object.keys(settings), 'jit', 'wal_level', 'autovacuum']) {
    const r = await admin.query('select current_setting($1, true) as v', [k]);
    effective[k] = r.rows[0].v;
  }
  if (profile) await admin.query('create extension if not exists pg_stat_statements');
  return {
    dir,
    url: handle.url,
    /** The server's log (src/db/embedded.ts writes its stderr there). */
    logFile: join(dir, 'pg', 'postgres.log'),
    version,
    settings: effective,
    admin,
    urlFor: (db) => withDatabase(handle.url, db),
    /** `strategy` 'file_copy' copies the template's files (a checkpoint each) instead of writing every block to the WAL. */
    async createDatabase(name, template, { strategy } = {}) {
      if (template) await terminate(admin, template);
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.query(
        template ? `create database ${name} template ${template}${strategy ? ` strategy ${strategy}` : ''}` : `create database ${name}`,
      );
      if (profile) {
        const c2 = new pg.Client({ connectionString: withDatabase(handle.url, name) });
        await c2.connect();
        await c2.query('create extension if not exists pg_stat_statements').catch(() => undefined);
        await c2.end();
      }
      return withDatabase(handle.url, name);
    },
    async dropDatabase(name) {
      await admin.query(`drop database if exists ${name} with (force)`);
    },
    async checkpoint() {
      await admin.query('checkpoint');
    },
    async stop() {
      await admin.end().catch(() => undefined);
      await handle.stop();
      if (!keptDir && !process.env.BENCH_KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function terminate(admin, db) {
  await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [db]);
}
