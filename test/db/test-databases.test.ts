import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DB_PREFIX, dropStale, startedAt } from '../helpers/global-setup.js';

// The test harness itself: the per-run database names and the sweep of databases crashed runs left.
let admin: pg.Client;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
});
afterAll(async () => admin.end());

const exists = async (name: string) => (await admin.query('select 1 from pg_database where datname = $1', [name])).rows.length === 1;

describe('test database names', () => {
  it("this run's template and databases carry a run prefix with the run's start time", () => {
    const prefix = inject('pgRunPrefix');
    expect(prefix.startsWith(DB_PREFIX)).toBe(true);
    expect(inject('pgTemplate').startsWith(prefix)).toBe(true);
    const at = startedAt(inject('pgTemplate'))!;
    expect(Date.now() - at).toBeGreaterThanOrEqual(0);
    expect(Date.now() - at).toBeLessThan(24 * 3600_000);
  });

  it('the sweep drops a database an hour-old run left, and keeps a recent one and one in use', async () => {
    const old = `${DB_PREFIX}${(Date.now() - 2 * 3600_000).toString(36)}_aaaaaa_left`;
    const oldInUse = `${DB_PREFIX}${(Date.now() - 2 * 3600_000).toString(36)}_bbbbbb_busy`;
    const recent = `${DB_PREFIX}${(Date.now() - 60_000).toString(36)}_cccccc_recent`;
    for (const n of [old, oldInUse, recent]) await admin.query(`create database ${n}`);
    const u = new URL(inject('pgAdminUrl'));
    u.pathname = `/${oldInUse}`;
    const busy = new pg.Client({ connectionString: u.toString() });
    await busy.connect();
    try {
      await dropStale(admin);
      expect([await exists(old), await exists(oldInUse), await exists(recent)]).toEqual([false, true, true]);
    } finally {
      await busy.end();
      for (const n of [old, oldInUse, recent]) await admin.query(`drop database if exists ${n} with (force)`);
    }
  });
});
