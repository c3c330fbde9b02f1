import { execFile } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { CliIo } from '../../src/cli/io.js';
import { run as runProgram } from '../../src/cli/main.js';

/** The built CLI (`npm run build` runs before the tests). */
export const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));

const execFileAsync = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Standard input (for `@-` arguments); empty by default. */
  input?: string;
  timeoutMs?: number;
  /** In-process only: stdout is a terminal this wide (the CLI prints for people: tables, sentences). */
  tty?: { columns: number };
}

/**
 * Run the built binary with these arguments and exactly this environment; a non-zero exit is a
 * result, not a throw. For what only a process shows (start-up, signals, pipes, the embedded
 * PostgreSQL a command starts or attaches to and stops): anything else runs in this process
 * with runCliInProcess, the same program at a fraction of the cost.
 */
export async function runCli(args: readonly string[], env: NodeJS.ProcessEnv, opts: CliOptions = {}): Promise<CliResult> {
  try {
    const p = execFileAsync(process.execPath, [BIN, ...args], { env, timeout: opts.timeoutMs ?? 60_000 });
    if (opts.input !== undefined) p.child.stdin?.end(opts.input);
    const { stdout, stderr } = await p;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** A stream that hands each chunk written to it to `onText`, as a string. */
function textSink(onText: (text: string) => void): Writable {
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      onText(chunk.toString());
      done();
    },
  });
}

/** What a run in this process must leave as it found it: the signal handlers, the exit code, the environment. */
function processState(): string {
  return JSON.stringify({
    SIGINT: process.listenerCount('SIGINT'),
    SIGTERM: process.listenerCount('SIGTERM'),
    exitCode: process.exitCode,
    env: process.env,
  });
}

function inProcessIo(
  env: NodeJS.ProcessEnv,
  input: string | undefined,
  stop: AbortSignal,
  out: (t: string) => void,
  err: (t: string) => void,
  tty?: { columns: number },
): CliIo {
  return {
    ...(tty ? { isTTY: true, columns: tty.columns } : {}),
    stdout: textSink(out),
    stderr: textSink(err),
    stdin: Readable.from(input === undefined ? [] : [Buffer.from(input)]),
    // A copy: the command sees exactly this environment and cannot change ours.
    env: { ...env },
    stdoutClosed: new AbortController().signal,
    stop,
  };
}

/** Check, once the command has finished, that it left this process as it found it. */
async function leavesNoTrace(argv: readonly string[], io: CliIo): Promise<number> {
  const before = processState();
  const code = await runProgram(argv, io);
  if (processState() !== before)
    throw new Error(`acw-webhooks ${argv.join(' ')} changed this process (signal handlers, exit code or environment)`);
  return code;
}

/**
 * Run the CLI's program in this process, with these arguments, exactly this environment, and
 * stdout and stderr of its own (src/cli/main.ts run): the same result as runCli, without a process
 * start. A run longer than the timeout is asked to stop (as SIGTERM would) and rejected.
 */
export async function runCliInProcess(args: readonly string[], env: NodeJS.ProcessEnv, opts: CliOptions = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const stop = new AbortController();
  const io = inProcessIo(
    env,
    opts.input,
    stop.signal,
    (t) => (stdout += t),
    (t) => (stderr += t),
    opts.tty,
  );
  const timeoutMs = opts.timeoutMs ?? 60_000;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      stop.abort();
      reject(new Error(`acw-webhooks ${args.join(' ')}: no exit within ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
  });
  try {
    const code = await Promise.race([leavesNoTrace(args, io), timedOut]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** A long-running command (`receive`, `alerts --follow`) run in this process; see startProc for a process. */
export interface CliInProcess {
  /** stdout and stderr, line by line, as they come. */
  lines: string[];
  /** Resolves with the first line matching `re`, printed before or after the call. */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Ask it to stop, as SIGTERM asks the binary; resolves with its exit code. */
  stop(): Promise<number>;
  exited: Promise<number>;
}

export function startCliInProcess(args: readonly string[], env: NodeJS.ProcessEnv = {}): CliInProcess {
  const lines: string[] = [];
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void }> = [];
  const lineSplitter = (): ((t: string) => void) => {
    let rest = '';
    return (text) => {
      rest += text;
      for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n')) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        lines.push(line);
        for (const w of waiters.filter((x) => x.re.test(line))) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    };
  };
  const stop = new AbortController();
  const io = inProcessIo(env, undefined, stop.signal, lineSplitter(), lineSplitter());
  const exited = leavesNoTrace(args, io);
  let ended: number | undefined;
  exited.then(
    (code) => (ended = code),
    () => undefined, // the caller's await reports it
  );
  return {
    lines,
    exited,
    waitForLine: (re, timeoutMs = 15_000) => {
      const found = lines.find((l) => re.test(l));
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const fail = (why: string) => reject(new Error(`no line matching ${re} ${why}; got:\n${lines.slice(-20).join('\n')}`));
        const t = setTimeout(() => fail(`within ${timeoutMs} ms`), timeoutMs);
        // A command that ends first will never print it: say so at once.
        void exited.then(
          () => (clearTimeout(t), fail(`before the command ended (exit ${ended})`)),
          (err: Error) => (clearTimeout(t), fail(`before the command failed: ${err.message}`)),
        );
        waiters.push({ re, resolve: (l) => (clearTimeout(t), resolve(l)) });
      });
    },
    stop: async () => {
      stop.abort();
      return exited;
    },
  };
}

/** The JSON lines a command printed. */
// The lines are whatever each command prints; tests read their fields directly.
// oxlint-disable-next-line no-explicit-any
export function jsonLines(s: string): Array<Record<string, any>> {
  return s
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
