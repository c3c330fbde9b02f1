import pg from 'pg';
import type { Logger } from '../log.js';

/**
 * The service's connection pool. Every connection's search_path is the configured schema, so the
 * SQL in this codebase names tables unqualified and an application may keep its own tables in
 * `public` beside ours.
 */
export function createPool(opts: { url: string; size: number; schema: string; log?: Logger; applicationName?: string }): pg.Pool {
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.size,
    options: `-c search_path=${opts.schema}`,
    application_name: opts.applicationName ?? 'acw-webhooks',
    idleTimeoutMillis: 30_000,
    // Fail fast instead of hanging when the server is unreachable; the callers retry.
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  // An idle client that loses its connection must not crash the process; the next query reconnects.
  pool.on('error', (err) => opts.log?.warn({ event: 'db.pool_error', err: err.message }, 'idle database connection failed'));
  // Nor may a checked-out one between two queries (the pool listens only while a client is idle):
  // PostgreSQL shutting down or pg_terminate_backend sends its error then, which pg emits as an
  // 'error' event. The client is unusable from then on: its next query fails, and release() drops it.
  pool.on('connect', (client) => {
    client.on('error', (err) => opts.log?.debug({ event: 'db.client_error', err: err.message }, 'database connection failed'));
  });
  return pool;
}

/** The few calls every writer needs: a pool, a client inside a transaction, or the caller's client. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

export interface TransactionOptions {
  /**
   * Commit without waiting for the WAL flush (`synchronous_commit = off`, this transaction only).
   * Only for work that is redone, identically, if a database crash loses it.
   */
  asyncCommit?: boolean;
  /**
   * Read the transaction's `now()` (what a `default now()` column gets) in the same round trip as
   * `begin`, as epoch milliseconds with the microseconds as their fraction (`new Date` drops them;
   * copy.ts's timestampField keeps them): passed to `fn` as its second argument (NaN when not asked).
   */
  readNow?: boolean;
  /**
   * Run prepared statements with their generic plan (`plan_cache_mode = force_generic_plan`, this
   * transaction only): for a statement PostgreSQL would otherwise plan again at every execution
   * because the arrays it is given make each custom plan look cheaper than the generic one.
   */
  genericPlans?: boolean;
}

/** Run `fn` inside one transaction on a pooled client, rolling back on error. */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, nowMs: number) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  const client = await pool.connect();
  // A client whose rollback fails is broken (its connection died mid-transaction): released with
  // the error, the pool destroys it instead of handing it out again.
  let broken: Error | undefined;
  try {
    // One round trip whatever is asked: without parameters this goes as a simple query.
    const sql = ['begin'];
    if (opts.asyncCommit) sql.push('set local synchronous_commit = off');
    if (opts.genericPlans) sql.push('set local plan_cache_mode = force_generic_plan');
    if (opts.readNow) sql.push('select (extract(epoch from now()) * 1000000)::int8 as now_us');
    const began = (await client.query(sql.join('; '))) as unknown as pg.QueryResult | pg.QueryResult[];
    // int8 comes as text; microseconds since 1970 stay below 2^53 until the year 2255.
    const nowMs = opts.readNow && Array.isArray(began) ? Number((began.at(-1)!.rows[0] as { now_us: string }).now_us) / 1000 : Number.NaN;
    const result = await fn(client, nowMs);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch((e: unknown) => {
      broken = e instanceof Error ? e : new Error(String(e));
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
