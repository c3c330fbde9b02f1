import { describe, expect, it, onTestFinished } from 'vitest';
import { loadMigrations, migrate, migrationStatus, MigrationError } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/** Each test its own database (none depends on what another migrated), dropped even when it fails. */
async function freshDatabase(migrated: boolean): Promise<TestDatabase> {
  const db = await createTestDatabase({ migrated });
  onTestFinished(() => db.drop());
  return db;
}

describe('migrate', () => {
  it('applies every migration once when several migrators race', async () => {
    const db = await freshDatabase(false);
    const results = await Promise.all(Array.from({ length: 5 }, () => migrate(db.pool, { schema: 'public' })));
    const applied = results.flatMap((r) => r.applied);
    const names = loadMigrations().map((m) => m.name);
    expect(applied.toSorted()).toEqual(names.toSorted());
    const { rows } = await db.pool.query('select id, count(*)::int as n from acw_migrations group by id');
    expect(rows.every((r: { n: number }) => r.n === 1)).toBe(true);
    expect(await migrationStatus(db.pool, 'public')).toEqual({ pending: [], unknown: [] });
  });

  it('installs into another schema so the service can share an application database', async () => {
    const db = await freshDatabase(false);
    await migrate(db.pool, { schema: 'acw' });
    expect((await db.pool.query(`select to_regclass('public.jobs') is null as untouched`)).rows[0].untouched).toBe(true);
    const { rows } = await db.pool.query(`select to_regclass('acw.jobs') is not null as ok`);
    expect(rows[0].ok).toBe(true);
    const id = await db.pool.query(`select acw.acw_notify('a.b', '{"x":1}') as id`);
    expect(id.rows[0].id).toMatch(/^[0-9a-f-]{36}$/);
    const ev = await db.pool.query('select count(*)::int as n from acw.events');
    expect(ev.rows[0].n).toBe(1);
  });

  it('refuses a database that has a migration this code does not know', async () => {
    const db = await freshDatabase(true);
    await db.pool.query(`insert into acw_migrations (id, name) values (9999, '9999_future')`);
    await expect(migrate(db.pool, { schema: 'public' })).rejects.toThrow(MigrationError);
    await expect(migrate(db.pool, { schema: 'public' })).rejects.toThrow(/9999/);
    expect((await migrationStatus(db.pool, 'public')).unknown).toEqual([9999]);
  });
});
