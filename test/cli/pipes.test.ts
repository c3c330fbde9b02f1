// `acw-webhooks jobs list | head -1`: a stdout closed by its reader ends the command quietly
// (exit 0, no stack trace) and the embedded PostgreSQL the command started is stopped again.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { embeddedUrl, removeSharedCopies, startEmbeddedPostgres } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { waitFor } from '../helpers/logs.js';

const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));
const run = promisify(execFile);

let dir: string;
let dataDir: string;
let cfg: string;
const pidFile = () => join(dataDir, 'pg', 'postmaster.pid');

/** Each command here runs with no other holder of the embedded server, so it starts it and must stop it. */
function env(): NodeJS.ProcessEnv {
  const { DATABASE_URL: _ignored, ...rest } = process.env;
  return { ...rest, DATABASE_URL: '', ACW_CONFIG: cfg };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Seed the embedded database (started and stopped here) with more of everything than a pipe holds. */
async function seed(): Promise<void> {
  const handle = await startEmbeddedPostgres(dataDir);
  const pool = new pg.Pool({ connectionString: handle.url, max: 2 });
  try {
    await migrate(pool, { schema: 'public' });
    const long = 'x'.repeat(1000);
    // 500 jobs (jobs list's maximum), 1000 alerts and 3000 users: each list is several times 64 KB.
    await pool.query(
      `insert into jobs (type, payload, status, attempts, endpoint, last_error)
       select 'webhook.deliver', jsonb_build_object('topic', 'a.b', 'body', '{}'), 'dead', 6, 'default', $1 from generate_series(1, 500)`,
      [long],
    );
    await pool.query(
      `insert into audit_log (action, actor, target_type, target_id, details)
       select 'webhook.dead_letter', 'system', 'job', gen_random_uuid()::text, jsonb_build_object('endpoint', 'default', 'last_error', $1::text)
       from generate_series(1, 1000)`,
      [long],
    );
    await pool.query(
      `insert into users (name, role) select 'user-' || lpad(i::text, 6, '0') || '-' || repeat('n', 100), 'viewer' from generate_series(1, 3000) i`,
    );
  } finally {
    await pool.end();
    await handle.stop();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'acw-pipes-'));
  dataDir = join(dir, 'data');
  cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `database: { data_dir: "${dataDir}" }\n`);
  await seed();
  if (existsSync(pidFile())) throw new Error('the seeding embedded PostgreSQL is still running');
}, 120_000);

afterEach(() => {
  // A command that failed to stop the server it started: stop it here, by the PID it recorded.
  if (existsSync(pidFile())) {
    const pid = Number(readFileSync(pidFile(), 'utf8').split('\n')[0]);
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGINT');
  }
});

afterAll(async () => {
  await waitFor(() => !existsSync(pidFile()), 30_000).catch(() => undefined);
  await removeSharedCopies(dataDir);
  rmSync(dir, { recursive: true, force: true });
});

describe('a list printed into a pipe closed early', () => {
  it.each([
    ['jobs', 'list', '--limit', '500'],
    ['users', 'list'],
    ['alerts', '--limit', '1000'],
  ])(
    '%s %s … | head -1: one line, exit 0, nothing on stderr, the database stopped',
    async (...args) => {
      // The shell pipeline as a user types it; PIPESTATUS carries the command's own exit code out.
      const script = `node "$0" "$@" | head -1; echo "exit=\${PIPESTATUS[0]}" >&2`;
      const { stdout, stderr } = await run('bash', ['-c', script, BIN, ...args], { env: env(), timeout: 120_000 });
      expect(stdout.trim().split('\n')).toHaveLength(1);
      expect(JSON.parse(stdout)).toBeTypeOf('object');
      expect(stderr).toBe('exit=0\n');
      expect(existsSync(pidFile())).toBe(false);
    },
    120_000,
  );

  it('alerts --follow | head -1: the next alert after the reader left ends it with exit 0 and the database stopped', async () => {
    const child = spawn(process.execPath, [BIN, 'alerts', '--follow'], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const rl = createInterface({ input: child.stdout });
      const first = await new Promise<string>((resolve) => rl.once('line', resolve));
      expect(JSON.parse(first)).toMatchObject({ action: 'webhook.dead_letter' });
      // What `head -1` does after its line: close the read end of the pipe.
      rl.close();
      child.stdout.destroy();
      const pgPid = Number(readFileSync(pidFile(), 'utf8').split('\n')[0]);
      // A new alert, so the follower writes again and meets the closed pipe.
      const port = Number(readFileSync(pidFile(), 'utf8').split('\n')[3]);
      const c = new pg.Client({ connectionString: embeddedUrl(port) });
      // The follower exits on this alert and stops the database it started, possibly before this
      // client has said goodbye: its backend is then terminated (57P01), which is expected here.
      c.on('error', () => undefined);
      await c.connect();
      try {
        await c.query(
          `with a as (insert into audit_log (action, actor, target_type, target_id, details) values ('webhook.dead_letter', 'system', 'job', 'x', '{}') returning id)
           select pg_notify('public.acw_alerts', id::text) from a`,
        );
      } catch (err) {
        // The notification goes out only after the insert commits, so the follower can stop the
        // database before this query's reply arrives; that termination (57P01) is the expected end.
        if ((err as { code?: string }).code !== '57P01') throw err;
      } finally {
        await c.end().catch(() => undefined);
      }
      expect(await exited).toBe(0);
      expect(stderr).toBe('');
      await waitFor(() => !alive(pgPid), 30_000);
      expect(existsSync(pidFile())).toBe(false);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 120_000);
});
