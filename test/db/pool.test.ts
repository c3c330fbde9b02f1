import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPool } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

// pg emits a connection error on a client with no query running as an 'error' event; the pool
// listens only while the client is idle in it. Without a listener of ours this is an uncaught
// exception (vitest fails the run), as PostgreSQL's shutdown killed `serve` in the chaos suite.
it('a checked-out client whose connection is terminated between two queries does not crash the process', async () => {
  const pool = createPool({ url: db.url, size: 2, schema: 'public' });
  try {
    const client = await pool.connect();
    const { pid } = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!;
    await db.pool.query('select pg_terminate_backend($1)', [pid]);
    await waitFor(async () => (await db.pool.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount === 0);
    // Its next query fails, and released with that error (as withTransaction does with a client
    // whose rollback failed), the broken client leaves the pool. A plain release() leaves it to
    // pg-pool to notice the dead connection, which depends on event timing (it failed on Node 24).
    const failed = await client.query('select 1').then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(failed?.message).toMatch(/terminat|not queryable|Connection terminated/i);
    client.release(failed ?? undefined);
    expect((await pool.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    expect(pool.totalCount).toBe(1);
  } finally {
    await pool.end();
  }
});
