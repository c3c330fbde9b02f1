import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { openDatabase, type Database } from '../db/connect.js';
import { migrationStatus } from '../db/migrate.js';
import { createLogger, type Logger } from '../log.js';
import { ApiError, UsageError } from '../errors.js';
import { writeLine } from './output.js';

/** Exit codes (README.md#operator-cli): 0 ok, 1 failure, 2 usage or configuration error. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** Thrown by a command to end with a code and a message on stderr. */
export class ExitError extends Error {
  override readonly name = 'ExitError';
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The exit code of whatever a command threw: the one place that decides between 1 and 2. A refusal
 * of bad input (400, 413) is a usage error; one of state (404, 409) a failure.
 */
export function exitCodeOf(err: unknown): number {
  if (err instanceof ExitError) return err.code;
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof ApiError) return err.status === 400 || err.status === 413 ? EXIT.usage : EXIT.failure;
  return EXIT.failure;
}

export interface GlobalOptions {
  config?: string;
}

/** `needSecrets: false` for commands that never deliver: they run without the endpoints' secrets (see LoadOptions). */
export function readConfig(opts: GlobalOptions, load: { needSecrets?: boolean } = {}): Config {
  try {
    return loadConfig({ ...(opts.config ? { path: opts.config } : {}), ...load });
  } catch (err) {
    if (err instanceof ConfigError) throw new ExitError(EXIT.usage, `configuration error:\n${err.issues.map((i) => `  ${i}`).join('\n')}`);
    throw err;
  }
}

/** Logs of one-shot commands go to stderr, so stdout carries only the command's answer. */
export function commandLogger(config: Config, level?: 'warn'): Logger {
  return createLogger({ level: level ?? (config.log.level === 'info' ? 'warn' : config.log.level), destination: process.stderr });
}

/** Open the database (attaching to a running embedded server), run `fn`, close it again. */
export async function withDatabase<T>(config: Config, fn: (db: Database, log: Logger) => Promise<T>): Promise<T> {
  const log = commandLogger(config);
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

/** One JSON line on stdout; false once stdout is closed (a list stops printing there). */
export function printJson(value: unknown): boolean {
  return writeLine(JSON.stringify(value));
}

/** Read `--data`-style arguments: inline text, `@file`, or `@-` for standard input. */
export async function readArg(value: string): Promise<string> {
  if (!value.startsWith('@')) return value;
  const path = value.slice(1);
  const { readFile } = await import('node:fs/promises');
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new ExitError(EXIT.usage, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

export function usage(message: string): never {
  throw new UsageError(message);
}
