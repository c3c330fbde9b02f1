import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The built CLI (`npm run build` runs before the tests). */
export const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));

const run = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the CLI with these arguments and exactly this environment; a non-zero exit is a result, not a throw. */
export async function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  try {
    const p = run(process.execPath, [BIN, ...args], { env, timeout: opts.timeoutMs ?? 60_000 });
    if (opts.input !== undefined) p.child.stdin?.end(opts.input);
    const { stdout, stderr } = await p;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
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
