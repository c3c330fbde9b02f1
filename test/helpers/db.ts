import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** A fresh database for one test file: a copy of the migrated template (fast), dropped afterwards. */
export async function createTestDatabase(opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `${inject('pgRunPrefix')}${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(opts.migrated === false ? `create database ${name}` : `create database ${name} template ${inject('pgTemplate')}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // Tests terminate backends on purpose (outages, killed connections): an idle client of this
  // pool that dies then must not become an uncaught error; its next query reconnects.
  pool.on('error', () => undefined);
  return {
    url,
    name,
    pool,
    drop: async () => {
      await pool.end();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * SQL for a version 7 UUID of the instant `at` (an SQL expression): an event id of that time, as
 * acw_uuid_v7 makes them of the clock, so that the event lands in that day's partition of event_log.
 */
export const V7_AT = (at: string): string =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from ${at}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;
