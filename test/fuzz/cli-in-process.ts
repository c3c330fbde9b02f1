// The CLI run in this process: main() takes the argv and answers the exit code; stdout and stderr
// are captured by replacing their write() for the run (no refactor of src/cli was needed).
import { main } from '../../src/cli/main.js';

export interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

const capture =
  (into: string[]) =>
  (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    cb?.();
    return true;
  };

/** One command line; `env` is set for the run (ACW_CONFIG, ACW_ENCRYPTION_KEY) and put back after. Rejects after `hangMs`. */
export async function runCliInProcess(argv: string[], env: Record<string, string>, hangMs = 10_000): Promise<Outcome> {
  const out: string[] = [];
  const err: string[] = [];
  const { write: outWrite } = process.stdout;
  const { write: errWrite } = process.stderr;
  process.stdout.write = capture(out) as typeof process.stdout.write;
  process.stderr.write = capture(err) as typeof process.stderr.write;
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  let timer: NodeJS.Timeout | undefined;
  try {
    const code = await Promise.race([
      main(argv),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no exit within ${hangMs} ms`)), hangMs))),
    ]);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    clearTimeout(timer);
    process.stdout.write = outWrite;
    process.stderr.write = errWrite;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    // A command may set it for the process's exit; each run starts without.
    process.exitCode = undefined;
  }
}
