import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Logger } from '../log.js';
import { quoteIdent, quoteLiteral } from './sql.js';

/**
 * Plain numbered SQL migrations (`migrations/NNNN_name.sql`): each applied once, in its own
 * transaction, under an advisory lock per schema, so any number of processes may start at once.
 * A database that has a migration this code does not know is refused: older code must not run
 * against a newer schema.
 */
export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export function loadMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  const files = readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .toSorted();
  return files.map((f) => ({
    id: Number(f.slice(0, 4)),
    name: f.replace(/\.sql$/, ''),
    sql: readFileSync(`${dir}/${f}`, 'utf8'),
  }));
}

/** Put the schema into a migration's text (`:"schema"` identifier, `:'schema'` literal). */
export function renderMigration(sql: string, schema: string): string {
  return sql.replaceAll(':"schema"', quoteIdent(schema)).replaceAll(":'schema'", quoteLiteral(schema));
}

export class MigrationError extends Error {
  override readonly name = 'MigrationError';
}

export interface MigrateOptions {
  schema: string;
  log?: Logger;
  migrations?: Migration[];
}

/** The advisory lock key for migrating one schema (two int4 halves). */
const LOCK_CLASS = 0x61637700; // "acw\0"

async function appliedIds(client: pg.ClientBase, schema: string): Promise<number[] | null> {
  const { rows } = await client.query<{ exists: boolean }>(`select to_regclass($1) is not null as exists`, [
    `${quoteIdent(schema)}.acw_migrations`,
  ]);
  if (!rows[0]?.exists) return null;
  const res = await client.query<{ id: number }>(`select id from ${quoteIdent(schema)}.acw_migrations order by id`);
  return res.rows.map((r) => r.id);
}

export async function migrate(pool: pg.Pool, opts: MigrateOptions): Promise<{ applied: string[] }> {
  const migrations = opts.migrations ?? loadMigrations();
  const schema = quoteIdent(opts.schema);
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('select pg_advisory_lock($1, hashtext($2))', [LOCK_CLASS, opts.schema]);
    try {
      await client.query(`create schema if not exists ${schema}`);
      await client.query(
        `create table if not exists ${schema}.acw_migrations (
           id integer primary key, name text not null, applied_at timestamptz not null default now())`,
      );
      const done = new Set((await appliedIds(client, opts.schema)) ?? []);
      const known = new Set(migrations.map((m) => m.id));
      const unknown = [...done].filter((id) => !known.has(id));
      if (unknown.length > 0) {
        throw new MigrationError(
          `database schema ${opts.schema} has migration ${unknown.join(', ')} that this version of acw-webhooks does not know; run a newer version`,
        );
      }
      for (const m of migrations) {
        if (done.has(m.id)) continue;
        await client.query('begin');
        try {
          // Recorded first: a concurrent migrator that got past the lock somehow fails on the key.
          await client.query(`insert into ${schema}.acw_migrations (id, name) values ($1, $2)`, [m.id, m.name]);
          await client.query(renderMigration(m.sql, opts.schema));
          await client.query('commit');
        } catch (err) {
          await client.query('rollback').catch(() => undefined);
          throw new MigrationError(`migration ${m.name} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(m.name);
        opts.log?.info({ event: 'db.migrated', migration: m.name, schema: opts.schema }, 'applied migration');
      }
    } finally {
      await client.query('select pg_advisory_unlock($1, hashtext($2))', [LOCK_CLASS, opts.schema]).catch(() => undefined);
    }
  } finally {
    client.release();
  }
  return { applied };
}

/** What /readyz asks: is every migration this code knows applied (and none it does not know)? */
export async function migrationStatus(
  db: pg.Pool | pg.ClientBase,
  schema: string,
  migrations: Migration[] = loadMigrations(),
): Promise<{ pending: string[]; unknown: number[] }> {
  const client = db as pg.ClientBase;
  const done = new Set((await appliedIds(client, schema)) ?? []);
  return {
    pending: migrations.filter((m) => !done.has(m.id)).map((m) => m.name),
    unknown: [...done].filter((id) => !migrations.some((m) => m.id === id)),
  };
}
