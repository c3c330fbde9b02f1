import { readFile } from 'node:fs/promises';
import { EXIT, ExitError } from './exit.js';

/**
 * Where one run of the CLI reads and writes. The binary runs with the process's own streams and
 * environment (`processIo`). A test or an embedding application runs the same program in its own
 * process (`run(argv, io)` in main.ts) with streams, environment and a `stop` signal of its own;
 * nothing of the process is then touched: no process.exit, no process.exitCode, no signal
 * handler, no environment variable, no heap setting.
 */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  /** Read by `--data @-` and `--body @-`, and only then. */
  readonly stdin: AsyncIterable<Buffer | string>;
  /** `${VAR}` in the config, DATABASE_URL, ACW_CONFIG, ACW_ENCRYPTION_KEY, USER. */
  readonly env: NodeJS.ProcessEnv;
  /**
   * stdout is a terminal: lists print aligned tables for a person instead of JSON lines (table.ts).
   * The binary asks process.stdout; a run in another process says so itself (false when absent).
   */
  readonly isTTY?: boolean;
  /** The terminal's width, when known: table lines are cut to it. */
  readonly columns?: number | undefined;
  /** Aborted once stdout is closed by its reader: a list stops printing there, a follower stops. */
  readonly stdoutClosed: AbortSignal;
  /**
   * For a run inside another process: aborting it stops a long-running command (serve, worker,
   * receive, alerts --follow) as SIGTERM stops the binary. Absent for the binary, which watches
   * the process's signals and its parent instead (stop.ts).
   */
  readonly stop?: AbortSignal;
}

/**
 * Standard output that may be closed under us: `acw-webhooks jobs list | head -1` closes the pipe
 * after one line, and the next write fails with EPIPE. Node reports that as an 'error' event on
 * process.stdout, which unhandled ended the command with a stack trace and exit 1 and skipped the
 * clean-up that stops an embedded PostgreSQL. A closed stdout only means nobody wants the rest:
 * stop printing, finish quietly (exit 0) and let the command close what it opened.
 */
const closed = new AbortController();

/** The process's own streams and environment. */
const PROCESS_IO: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  // A getter: process.stdin is made on first use, and most commands never read it.
  get stdin() {
    return process.stdin;
  },
  env: process.env,
  get isTTY() {
    return process.stdout.isTTY === true;
  },
  get columns() {
    return process.stdout.columns;
  },
  stdoutClosed: closed.signal,
};

export function processIo(): CliIo {
  return PROCESS_IO;
}

let guarded = false;

/** Handle errors on the process's stdout and stderr (once per process; main() calls it). */
export function guardOutput(): void {
  if (guarded) return;
  guarded = true;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (!closed.signal.aborted) closed.abort();
    if (err.code !== 'EPIPE') {
      process.stderr.write(`error: cannot write to stdout: ${err.code ?? err.message}\n`);
      process.exitCode = 1;
    }
  });
  // A closed stderr leaves nowhere to report anything; carry on without it.
  process.stderr.on('error', () => undefined);
}

/** Write one line to stdout; false once stdout is closed (callers printing a list stop there). */
export function writeLine(io: CliIo, text: string): boolean {
  if (io.stdoutClosed.aborted) return false;
  io.stdout.write(`${text}\n`);
  return true;
}

/** One JSON line on stdout; false once stdout is closed (a list stops printing there). */
export function printJson(io: CliIo, value: unknown): boolean {
  return writeLine(io, JSON.stringify(value));
}

/** Read `--data`-style arguments: inline text, `@file`, or `@-` for standard input. */
export async function readArg(io: CliIo, value: string): Promise<string> {
  if (!value.startsWith('@')) return value;
  const path = value.slice(1);
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const c of io.stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new ExitError(EXIT.usage, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}
