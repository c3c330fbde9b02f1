import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { removeSharedCopies, startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    /** Prefix of this run's per-file database names (see test/helpers/db.ts). */
    pgRunPrefix: string;
  }
}

/**
 * Every database a run makes is named `acw_t_<run>_…`, `<run>` being its start time in base 36 and
 * a random part: two runs sharing a DATABASE_URL never collide, and the start time says how old a
 * database left by a crashed run is.
 */
export const DB_PREFIX = 'acw_t_';
const STALE_MS = 60 * 60_000;

function runId(): string {
  return `${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

/** The start time written in a test database's name, or undefined for a name not made here. */
export function startedAt(name: string): number | undefined {
  const m = new RegExp(`^${DB_PREFIX}([0-9a-z]+)_`).exec(name);
  return m ? parseInt(m[1]!, 36) : undefined;
}

/** Drop test databases left by earlier runs: older than an hour and with no connection open. */
export async function dropStale(admin: pg.Client): Promise<void> {
  const res = await admin.query<{ datname: string }>(
    `select datname from pg_database d
      where starts_with(datname, $1) and not exists (select 1 from pg_stat_activity a where a.datname = d.datname)`,
    [DB_PREFIX],
  );
  for (const { datname } of res.rows) {
    const at = startedAt(datname);
    if (at === undefined || Date.now() - at < STALE_MS) continue;
    // A database another run opens right now is left for next time.
    await admin.query(`drop database if exists "${datname}"`).catch(() => undefined);
  }
}

/**
 * The run's own embedded server only (never a DATABASE_URL server): no fsync and no full-page
 * images. Each file's `create database`, and every commit of every test, would otherwise wait for
 * the disk (about 5 ms a flush on CI's virtual disk). What they guard against, an operating system
 * crash, no test makes; a server stopped or killed, as tests do, still loses nothing committed:
 * its writes are in the kernel's page cache (synchronous_commit stays on).
 */
async function noFsync(admin: pg.Client): Promise<void> {
  await admin.query(`alter system set fsync = off`);
  await admin.query(`alter system set full_page_writes = off`);
  await admin.query(`select pg_reload_conf()`);
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/**
 * One PostgreSQL per test run: embedded PostgreSQL 18 in a temporary directory, or the server in
 * DATABASE_URL when it is set. A migrated template database is made once; each test file copies it.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let handle: EmbeddedPostgresHandle | undefined;
  let dir: string | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'acw-test-pg-'));
    handle = await startEmbeddedPostgres(dir);
    adminUrl = handle.url;
  }
  const prefix = `${DB_PREFIX}${runId()}_`;
  const template = `${prefix}template`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  if (handle) await noFsync(admin);
  await dropStale(admin);
  await admin.query(`create database ${template}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: withDatabase(adminUrl, template), max: 2 });
  await migrate(pool, { schema: 'public' });
  await pool.end();
  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);
  project.provide('pgRunPrefix', prefix);
  const url = adminUrl;
  return async () => {
    if (!handle) {
      // A shared server outlives the run: drop what this run made (a file's database that a
      // failing test left behind included).
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const left = await c.query<{ datname: string }>(`select datname from pg_database where starts_with(datname, $1)`, [prefix]);
        for (const { datname } of left.rows) await c.query(`drop database if exists "${datname}" with (force)`);
      } finally {
        await c.end();
      }
    }
    await handle?.stop();
    if (dir) {
      // Run as root from a private directory (a CI clone), the cluster and a copy of the binaries
      // live under /var/tmp: about 60 MB per run that nothing else would remove.
      await removeSharedCopies(dir, { binaries: true });
      rmSync(dir, { recursive: true, force: true });
    }
  };
}
