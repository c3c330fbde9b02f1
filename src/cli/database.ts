import type { Config } from '../config/index.js';
import { openDatabase, type Database } from '../db/connect.js';
import { migrationStatus } from '../db/migrate.js';
import { createLogger, type Logger } from '../log.js';
import { EXIT, ExitError } from './exit.js';
import type { CliIo } from './io.js';

// The database and the logger of the commands that use one. Imported by their actions only, so
// `--help`, `verify` and `config check` load neither pg nor pino.

/** Logs of one-shot commands go to stderr, so stdout carries only the command's answer. */
export function commandLogger(io: CliIo, config: Config, level?: 'warn'): Logger {
  return createLogger({ level: level ?? (config.log.level === 'info' ? 'warn' : config.log.level), destination: io.stderr });
}

/** Open the database (attaching to a running embedded server), run `fn`, close it again. */
export async function withDatabase<T>(io: CliIo, config: Config, fn: (db: Database, log: Logger) => Promise<T>): Promise<T> {
  const log = commandLogger(io, config);
  const db = await openDatabase(config, log, { poolSize: 4 });
  try {
    return await fn(db, log);
  } catch (err) {
    throw (await notMigrated(config, db, err)) ?? err;
  } finally {
    await db.close();
  }
}

/**
 * A missing table (42P01) in a database this version has not migrated: a usual first-run mistake
 * (or a command pointed at another data_dir), said plainly instead of `relation "jobs" does not exist`.
 */
async function notMigrated(config: Config, db: Database, err: unknown): Promise<ExitError | null> {
  if ((err as { code?: unknown } | null)?.code !== '42P01') return null;
  const status = await migrationStatus(db.pool, db.schema).catch(() => null);
  if (!status || status.pending.length === 0) return null;
  const where = db.embedded ? `the embedded PostgreSQL under ${config.database.data_dir}` : `database ${databaseName(db.url)}`;
  return new ExitError(
    EXIT.failure,
    `${where} is not migrated (schema ${db.schema}: ${status.pending.length} migration(s) pending): ` +
      'run `acw-webhooks migrate` with the same config, or start `acw-webhooks serve`, which migrates at start',
  );
}

/** `name on host:port`, never the user or password of the URL. */
function databaseName(url: string): string {
  try {
    const u = new URL(url);
    return `${decodeURIComponent(u.pathname.slice(1)) || '(default)'} on ${u.hostname || 'localhost'}:${u.port || '5432'}`;
  } catch {
    return '(from database.url)';
  }
}
