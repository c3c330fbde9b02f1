import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface Proc {
  child: ChildProcess;
  pid: number;
  lines: string[];
  /** Resolves with the first stdout line matching `re`. */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM (or the given signal) and wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Start a process we own (stopped by PID in afterEach), collecting stdout and stderr lines. */
export function startProc(cmd: string, args: string[], env: Record<string, string> = {}, opts: { cwd?: string } = {}): Proc {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  const lines: string[] = [];
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void }> = [];
  const onLine = (l: string) => {
    lines.push(l);
    const matched = waiters.filter((w) => w.re.test(l));
    for (const w of matched) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(l);
    }
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    pid: child.pid!,
    lines,
    exited,
    waitForLine: (re, timeoutMs = 15_000) => {
      const found = lines.find((l) => re.test(l));
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const fail = (why: string) => reject(new Error(`no line matching ${re} ${why}; got:\n${lines.slice(-20).join('\n')}`));
        const t = setTimeout(() => fail(`within ${timeoutMs} ms`), timeoutMs);
        // A process that exits first will never print it: say so at once.
        void exited.then((code) => (clearTimeout(t), fail(`before the process exited (code ${code})`)));
        waiters.push({ re, resolve: (l) => (clearTimeout(t), resolve(l)) });
      });
    },
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
