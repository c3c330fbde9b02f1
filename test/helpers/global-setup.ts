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
  }
}

export const TEMPLATE = 'acw_test_template';

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
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${TEMPLATE}`);
  await admin.query(`create database ${TEMPLATE}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: withDatabase(adminUrl, TEMPLATE), max: 2 });
  await migrate(pool, { schema: 'public' });
  await pool.end();
  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', TEMPLATE);
  return async () => {
    await handle?.stop();
    if (dir) {
      // Run as root from a private directory (a CI clone), the cluster and a copy of the binaries
      // live under /var/tmp: about 60 MB per run that nothing else would remove.
      await removeSharedCopies(dir, { binaries: true });
      rmSync(dir, { recursive: true, force: true });
    }
  };
}
