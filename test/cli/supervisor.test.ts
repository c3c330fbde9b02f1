// The process a supervisor (or a terminal's `kill`) signals is the outer one: npm, npx, or a shell.
// Each test signals only that process and then checks, by PID, that the service and its embedded
// PostgreSQL are gone and that the port no longer answers.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { removeSharedCopies } from '../../src/db/embedded.js';
import { waitFor } from '../helpers/logs.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin', 'acw-webhooks.js');
const GRACE_MS = 2_000;
// Shutdown is bounded by the grace for deliveries plus the embedded server's fast stop (which
// stopServer waits up to 30 s for); far more than that means it is not stopping at all.
const STOPPED_WITHIN_MS = GRACE_MS + 40_000;

let dir: string;
let proj: string;
let dataDir: string;
let cfg: string;
const started: Outer[] = [];
const pids: number[] = [];

interface Outer {
  child: ChildProcess;
  lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  waitForLine(re: RegExp, timeoutMs: number): Promise<string>;
}

/** The environment of a fresh terminal: none of the npm_* variables of the `npm test` running us. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && k !== 'INIT_CWD' && k !== 'DATABASE_URL') env[k] = v;
  return { ...env, ...extra };
}

function start(cmd: string, args: string[], env: Record<string, string>): Outer {
  const child = spawn(cmd, args, { cwd: proj, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('exit', (code, signal) => r({ code, signal })),
  );
  let gone = false;
  void exited.then(() => (gone = true));
  const outer: Outer = {
    child,
    lines,
    exited,
    waitForLine: async (re, timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find((l) => re.test(l));
        if (found) return found;
        if (gone || Date.now() > deadline)
          throw new Error(
            `no line matching ${re} ${gone ? 'before the exit' : `within ${timeoutMs} ms`}; got:\n${lines.slice(-30).join('\n')}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  started.push(outer);
  return outer;
}

/** Running, and not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return true;
  } catch {
    return false;
  }
}

/** The embedded server's postmaster PID, from its postmaster.pid. */
function postgresPid(): number {
  return Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
}

/** The PIDs whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const text = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (text) out.push(...text.split(/\s+/).map(Number));
  }
  return out;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'acw-supervisor-'));
  // A copy of the package (sources, scripts, bin), so prestart's and npx's build write their own
  // dist/ and not the one the other test files run.
  proj = join(dir, 'proj');
  mkdirSync(proj);
  for (const f of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'vite.config.ts']) cpSync(join(ROOT, f), join(proj, f));
  for (const d of ['src', 'bin', 'migrations', 'dashboard', 'scripts']) cpSync(join(ROOT, d), join(proj, d), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(proj, 'node_modules'));
  // The entries below run with npm's lifecycle scripts off (prestart, prepare), so each one starts
  // the service without building again: the subject is the signals, not the build. Its dist/ is a
  // copy of the one this run tests (`npm run build` runs before the tests).
  cpSync(join(ROOT, 'dist'), join(proj, 'dist'), { recursive: true });
  dataDir = join(dir, 'data');
  cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `database: { data_dir: "${dataDir}" }\nserver: { listen: "127.0.0.1:0" }\njobs: { shutdown_grace: ${GRACE_MS}ms }\n`);
});

afterEach(() => {
  // Whatever a failed test left behind, by PID: the outer processes, the service, its database.
  for (const o of started.splice(0)) if (o.child.exitCode === null && o.child.signalCode === null) o.child.kill('SIGKILL');
  for (const pid of pids.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

afterAll(async () => {
  await removeSharedCopies(dataDir);
  rmSync(dir, { recursive: true, force: true });
});

describe('signals to the process a supervisor started', () => {
  // The npm start script execs node, so npm's forwarded signal reaches the service itself and npm
  // waits for its exit code; npx's `sh -c` dies of a forwarded SIGTERM and the service sees its parent go.
  it.each([
    { entry: 'npm start', signal: 'SIGTERM' as const, why: { signal: 'SIGTERM' }, exit: { code: 0, signal: null } },
    { entry: 'npm start', signal: 'SIGINT' as const, why: { signal: 'SIGINT' }, exit: { code: 0, signal: null } },
    { entry: 'npx acw-webhooks serve', signal: 'SIGTERM' as const, why: { reason: 'parent_exited' }, exit: expect.anything() },
  ])(
    '$signal to `$entry` stops serve and its embedded PostgreSQL',
    async ({ entry, signal, why, exit }) => {
      const env = {
        ACW_CONFIG: cfg,
        DATABASE_URL: '',
        npm_config_cache: join(dir, 'npm-cache'),
        npm_config_update_notifier: 'false',
        npm_config_ignore_scripts: 'true',
      };
      const outer = entry === 'npm start' ? start('npm', ['start'], env) : start('npx', ['acw-webhooks', 'serve'], env);
      // The package was built in beforeAll; the service initialises its embedded PostgreSQL first.
      const line = await outer.waitForLine(/"service\.listening"/, 180_000);
      const { pid, address } = JSON.parse(line) as { pid: number; address: string };
      const pg = postgresPid();
      pids.push(pid, pg);
      expect(alive(pid) && alive(pg)).toBe(true);
      expect(await answers(`${address}/healthz`)).toBe(true);

      outer.child.kill(signal);
      await waitFor(() => !alive(pid) && !alive(pg), STOPPED_WITHIN_MS, 100);
      expect(await answers(`${address}/healthz`)).toBe(false);
      expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
      const stopping = outer.lines.filter((l) => l.includes('"service.stopping"')).map((l) => JSON.parse(l) as unknown);
      expect(stopping).toEqual([expect.objectContaining(why)]);
      expect(await outer.exited).toEqual(exit);
      expect(outer.lines.filter((l) => l.includes('"service.stopped"'))).toHaveLength(1);
    },
    300_000,
  );

  it.each(['SIGTERM', 'SIGKILL'] as const)(
    '%s to the `sh -c` that runs `receive` (as npx does) stops the receiver',
    async (signal) => {
      // `; exit $?` keeps even a shell that would exec a lone command (bash) in between, as dash always is.
      const outer = start('sh', ['-c', 'node "$0" receive --listen 127.0.0.1:0 --secret s3cret; exit $?', BIN], {});
      const line = await outer.waitForLine(/^listening on /, 30_000);
      const url = line.replace(/^listening on /, '');
      const [pid] = childrenOf(outer.child.pid!);
      expect(pid).toBeDefined();
      pids.push(pid!);
      expect(await answers(url)).toBe(true);
      outer.child.kill(signal);
      await waitFor(() => !alive(pid!), STOPPED_WITHIN_MS, 100);
      expect(await answers(url)).toBe(false);
    },
    STOPPED_WITHIN_MS + 60_000,
  );
});
