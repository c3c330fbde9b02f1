import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { openDatabase, type Database } from '../db/connect.js';
import { createLogger, type Logger } from '../log.js';
import { UsageError } from '../errors.js';
import { writeLine } from './output.js';

/** Exit codes (spec §8): 0 ok, 1 failure, 2 usage or configuration error. */
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

export interface GlobalOptions {
  config?: string;
}

export function readConfig(opts: GlobalOptions): Config {
  try {
    return loadConfig(opts.config ? { path: opts.config } : {});
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
  } finally {
    await db.close();
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
