import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { NO_WORKER_WARNING } from '../../src/admin/processes.js';
import { removeSharedCopies } from '../../src/db/embedded.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';
import { startTestService } from '../helpers/service.js';
import { BIN, runCliInProcess } from '../helpers/cli.js';

// `acw-webhooks status`, `db url` and notify's warning, run in this process; the serve holding an
// embedded server is a process of its own.

let db: TestDatabase;
let dir: string;
const procs: Proc[] = [];
const stops: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-status-'));
});
afterAll(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await db.pool.query('truncate processes');
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
  await Promise.all(stops.splice(0).map((s) => s()));
});

async function cli(args: string[], env: Record<string, string> = { DATABASE_URL: db.url }) {
  const { DATABASE_URL: _ignored, ...base } = process.env;
  return runCliInProcess(args, { ...base, ...env });
}
const lines = (s: string) =>
  s
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, Record<string, unknown>>);

describe('acw-webhooks status and db url', () => {
  it('status prints the database (password redacted) and each process, gone ones marked; db url prints the URL alone', async () => {
    const s = await startTestService(db, {}, { mode: 'worker' });
    stops.push(() => s.svc.stop());
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, last_seen) values ('h:1:gone', 'serve', 'h', 1, '0.0.1', false, now() - interval '5 minutes')`,
    );
    const st = await cli(['status']);
    expect(st).toMatchObject({ code: 0, stderr: '' });
    const [first, ...rest] = lines(st.stdout);
    expect(first!.database).toMatchObject({ embedded: false });
    const shown = String(first!.database!.url);
    const u = new URL(db.url);
    // The test database's URL carries a password: status shows it redacted.
    expect(u.password).not.toBe('');
    expect(shown).not.toContain(`:${u.password}@`);
    expect(shown).toContain(u.host);
    expect(rest.map((l) => [l.process!.id, l.process!.gone])).toEqual([
      [s.svc.workers!.workerId, false],
      ['h:1:gone', true],
    ]);
    expect(rest[0]!.process).toMatchObject({ mode: 'worker', host: hostname(), pid: process.pid, jobs: true });

    const url = await cli(['db', 'url']);
    expect(url).toEqual({ code: 0, stdout: `${db.url}\n`, stderr: '' });
  });

  it('notify warns on stderr and in its answer when no worker has been seen in the last minute, and not when one runs', async () => {
    const alone = await cli(['notify', 'a.b']);
    expect(alone.code).toBe(0);
    expect(JSON.parse(alone.stdout)).toMatchObject({ warning: NO_WORKER_WARNING });
    expect(alone.stderr).toContain(`warning: ${NO_WORKER_WARNING}`);
    const s = await startTestService(db, {}, { mode: 'worker' });
    stops.push(() => s.svc.stop());
    const seen = await cli(['notify', 'a.b']);
    expect(seen.code).toBe(0);
    expect(JSON.parse(seen.stdout)).not.toHaveProperty('warning');
    expect(seen.stderr).not.toContain('warning');
  });

  it('with the embedded server not running, status says so and db url fails, neither starting it', async () => {
    const dataDir = join(dir, 'none');
    const cfg = join(dir, 'none.yaml');
    writeFileSync(cfg, `database: { data_dir: "${dataDir}" }\n`);
    const st = await cli(['status', '-c', cfg], { DATABASE_URL: '' });
    expect(st.code).toBe(0);
    expect(lines(st.stdout)).toEqual([{ database: { embedded: true, running: false, data_dir: dataDir } }]);
    expect(st.stderr).toMatch(/embedded PostgreSQL under .* is not running/);
    const url = await cli(['db', 'url', '-c', cfg], { DATABASE_URL: '' });
    expect(url.code).toBe(1);
    expect(url.stdout).toBe('');
    expect(url.stderr).toMatch(/is not running: start `acw-webhooks serve`/);
    expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  });

  it('with the embedded server, status prints its URL and the serve holding it; db url prints a URL that connects', async () => {
    const dataDir = join(dir, 'data');
    onTestFinished(async () => {
      await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
      const pidFile = join(dataDir, 'pg', 'postmaster.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN;
      if (pid > 0) {
        try {
          process.kill(pid, 'SIGINT');
          await waitFor(() => !existsSync(pidFile), 30_000);
        } catch {
          // Already gone.
        }
      }
      await removeSharedCopies(dataDir);
    });
    const cfg = join(dir, 'embedded.yaml');
    writeFileSync(cfg, `database: { data_dir: "${dataDir}" }\nserver: { listen: "127.0.0.1:0" }\n`);
    const p = startProc(process.execPath, [BIN, 'serve', '-c', cfg], { DATABASE_URL: '' });
    procs.push(p);
    await p.waitForLine(/service\.listening/, 60_000);

    const url = await cli(['db', 'url', '-c', cfg], { DATABASE_URL: '' });
    expect(url.code).toBe(0);
    expect(url.stdout).toMatch(/^postgres:\/\/[^\n]+@127\.0\.0\.1:\d+\/[^\n]+\n$/);
    const c = new pg.Client({ connectionString: url.stdout.trim() });
    await c.connect();
    try {
      expect((await c.query('select count(*)::int as n from processes')).rows[0].n).toBe(1);
    } finally {
      await c.end();
    }

    const st = await cli(['status', '-c', cfg], { DATABASE_URL: '' });
    expect(st.code).toBe(0);
    const [first, proc] = lines(st.stdout);
    expect(first!.database).toMatchObject({ embedded: true, running: true, url: url.stdout.trim(), data_dir: dataDir });
    expect(proc!.process).toMatchObject({ mode: 'serve', pid: p.pid, jobs: true, gone: false });
    // The serve holds the server; status itself does not.
    expect(first!.database!.holders).toEqual([{ pid: p.pid, since: expect.any(String), process: proc!.process!.id, mode: 'serve' }]);
    expect(await p.stop('SIGTERM')).toBe(0);
  }, 120_000);
});
