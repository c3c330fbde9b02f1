import type pg from 'pg';
import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded.js';
import { createPool } from './pool.js';

export interface Database {
  url: string;
  pool: pg.Pool;
  schema: string;
  /** The embedded server this process uses (started or attached to): let go of at close, stopped by the last process to. */
  embedded: EmbeddedPostgresHandle | null;
  close(): Promise<void>;
}

/**
 * The database from `database.url` (DATABASE_URL overrides it in the loader), or else the embedded
 * PostgreSQL under `database.data_dir`: attached to when another process already runs it.
 */
export async function openDatabase(config: Config, log?: Logger, opts: { poolSize?: number } = {}): Promise<Database> {
  let url = config.database.url;
  let embedded: EmbeddedPostgresHandle | null = null;
  if (!url) {
    const handle = await startEmbeddedPostgres(config.database.data_dir, log);
    url = handle.url;
    embedded = handle;
  }
  const pool = createPool({
    url,
    size: opts.poolSize ?? config.database.pool_size,
    schema: config.database.schema,
    ...(log ? { log } : {}),
  });
  let closed = false;
  return {
    url,
    pool,
    schema: config.database.schema,
    embedded,
    close: async () => {
      if (closed) return;
      closed = true;
      await pool.end();
      await embedded?.stop();
    },
  };
}
