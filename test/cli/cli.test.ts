import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { removeSharedCopies } from '../../src/db/embedded.js';
import { signAcw } from '../../src/webhook/sign.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { BIN, runCli, runCliInProcess, type CliResult } from '../helpers/cli.js';

const EXAMPLE = fileURLToPath(new URL('../../config.example.yaml', import.meta.url));

/** The environment of the test run without DATABASE_URL, and `env` on top. */
function envWith(env: Record<string, string>): NodeJS.ProcessEnv {
  const { DATABASE_URL: _ignored, ...base } = process.env;
  return { ...base, ...env };
}

/** A command run in this process (test/helpers/cli.ts): what it prints, exits with and writes. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCliInProcess(args, envWith(env));
}

/** The binary, for a command that starts, attaches to or stops the embedded PostgreSQL as a process of its own. */
async function spawnCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(args, envWith(env));
}

let dir: string;
let db: TestDatabase;
let rx: Receiver;
const procs: Proc[] = [];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'acw-cli-'));
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  rmSync(dir, { recursive: true, force: true });
});
// Each test its own database and a receiver with no requests from the test before.
beforeEach(async () => {
  db = await createTestDatabase();
  rx.requests.splice(0);
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
  await db.drop();
});

/**
 * Stop the embedded PostgreSQL under `dataDir` (by the PID in its postmaster.pid: the server our
 * SIGKILLed child started) and remove its files under /var/tmp, also when the test fails.
 */
function cleanUpEmbedded(dataDir: string): void {
  onTestFinished(async () => {
    await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
    const pidFile = join(dataDir, 'pg', 'postmaster.pid');
    const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN;
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGINT'); // PostgreSQL's fast shutdown
        await waitFor(() => !existsSync(pidFile), 30_000);
      } catch {
        // Already gone.
      }
    }
    await removeSharedCopies(dataDir);
  });
}

function writeConfig(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('config check', () => {
  it('passes config.example.yaml as shipped (exit 0)', async () => {
    const r = await cli(['config', 'check', '-c', EXAMPLE]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toContain('ok');
  });

  it('warns, still exit 0, about an endpoint with a URL and no topics (it would receive nothing)', async () => {
    const path = writeConfig(
      'no-topics.yaml',
      'notify:\n  webhook:\n    url: http://127.0.0.1:9/x\n    secret: s\n    endpoints:\n      - { name: b, url: "http://127.0.0.1:9/b", secret: s, topics: ["a.*"] }\n      - { name: c, url: "http://127.0.0.1:9/c", secret: s }\n',
    );
    const r = await cli(['config', 'check', '-c', path]);
    expect(r.code).toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([
      'warning: notify.webhook.topics: empty: this endpoint receives no event (list topics, "prefix.*" or "*")',
      'warning: notify.webhook.endpoints[1].topics: empty: this endpoint receives no event (list topics, "prefix.*" or "*")',
    ]);
  });

  it('exits 2 naming every bad key, never echoing a secret', async () => {
    const path = writeConfig(
      'bad.yaml',
      'jobs:\n  wokers: 4\n  job_reaper:\n    lease_timeout: 5 minutes\nnotify:\n  webhook:\n    url: http://127.0.0.1:9/x\n    secret: ""\n    topics: ["Bad Topic"]\n',
    );
    const r = await cli(['config', 'check', '-c', path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('jobs.wokers');
    expect(r.stderr).toContain('did you mean "workers"');
    expect(r.stderr).toContain('jobs.job_reaper.lease_timeout: expected a duration like "5m", got "5 minutes"');
    expect(r.stderr).toContain('notify.webhook.secret');
    expect(r.stderr).toContain('notify.webhook.topics[0]');
  });

  it('takes -c FILE anywhere on the line: before the command, between group and command, or after', async () => {
    const bad = writeConfig('unknown-key.yaml', 'jobs:\n  wokers: 4\n');
    for (const args of [
      ['-c', bad, 'config', 'check'],
      ['--config', bad, 'config', 'check'],
      ['config', '-c', bad, 'check'],
      ['config', 'check', `--config=${bad}`],
    ]) {
      const r = await cli(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toContain('jobs.wokers');
    }
    // The nearest one wins: the command's own over the top-level one, wherever they stand.
    expect((await cli(['-c', bad, 'config', 'check', '-c', EXAMPLE])).code).toBe(0);
    expect((await cli(['config', '-c', EXAMPLE, 'check', '-c', bad])).code).toBe(2);
    // A value that starts with -c further right belongs to its own option, not to the top level's -c.
    const v = await cli(['verify', '--secret', '-cafe1', '--timestamp', '1700000000', '--signature', 'sha256=00', '--body', '@' + EXAMPLE]);
    expect(v.stderr).not.toMatch(/argument missing|not specified/);
    expect(v.code).toBe(1);
  });

  it('names an unset ${VAR} without showing anything of it', async () => {
    const path = writeConfig('env.yaml', 'notify:\n  webhook:\n    url: http://127.0.0.1:9/x\n    secret: ${ACW_TEST_UNSET_SECRET}\n');
    const r = await cli(['config', 'check', '-c', path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('ACW_TEST_UNSET_SECRET');
  });
});

describe('CLI basics', () => {
  it('--help works on every command and an unknown command is a usage error', async () => {
    for (const args of [
      ['--help'],
      ['serve', '--help'],
      ['worker', '--help'],
      ['migrate', '--help'],
      ['notify', '--help'],
      ['verify', '--help'],
      ['receive', '--help'],
      ['config', 'check', '--help'],
    ]) {
      const r = await cli(args);
      expect({ args, code: r.code }).toEqual({ args, code: 0 });
      expect(r.stdout).toContain('Usage:');
    }
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['notify'])).code).toBe(2);
  });

  it('verify: exit 0 for a good signature, 1 for a tampered body', async () => {
    const body = '{"event_id":"e","topic":"a.b","occurred_at":"2026-01-01T00:00:00.000Z","data":{}}';
    const ts = Math.floor(Date.now() / 1000);
    const sig = signAcw('s3cret', ts, body);
    const file = writeConfig('body.json', body);
    const ok = await cli(['verify', '--secret', 's3cret', '--timestamp', String(ts), '--signature', sig, '--body', `@${file}`]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ valid: true });
    const bad = await cli(['verify', '--secret', 's3cret', '--timestamp', String(ts), '--signature', sig, '--body', body + ' ']);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout)).toEqual({ valid: false, reason: 'signature_mismatch' });
    expect(bad.stdout + bad.stderr).not.toContain('s3cret');
  });

  it('migrate and notify work against DATABASE_URL', async () => {
    const cfg = writeConfig('notify.yaml', `notify:\n  webhook: { url: "${rx.url}/cli", secret: s3cret, topics: ["cli.*"] }\n`);
    const m = await cli(['migrate', '-c', cfg], { DATABASE_URL: db.url });
    expect(m).toMatchObject({ code: 0, stdout: 'up to date\n' });
    const n = await cli(['notify', 'cli.hello', '--data', '{"x":1}', '-c', cfg], { DATABASE_URL: db.url });
    expect(n.code).toBe(0);
    const out = JSON.parse(n.stdout);
    expect(out.job_ids).toHaveLength(1);
    expect(out.replayed).toBe(false);
    const row = (await db.pool.query('select type, endpoint, status from jobs where id = $1', [out.job_ids[0]])).rows[0];
    expect(row).toEqual({ type: 'webhook.deliver', endpoint: 'default', status: 'pending' });
    // The same idempotency key again: the first answer, marked as a replay, and nothing written.
    const keyed = async () =>
      JSON.parse((await cli(['notify', 'cli.hello', '--idempotency-key', 'k-1', '-c', cfg], { DATABASE_URL: db.url })).stdout);
    const first = await keyed();
    expect(await keyed()).toEqual({ ...first, replayed: true });
    expect(first.replayed).toBe(false);
    const bad = await cli(['notify', 'Bad Topic', '-c', cfg], { DATABASE_URL: db.url });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('topic');
  });
});

// Real processes on a shared machine: a start-up can take tens of seconds under load. Their waits
// and the tests' deadlines are hang guards (STARTUP, and the describe's timeout), never what a test
// asserts.
const STARTUP = 60_000;

describe('serve and worker processes', { timeout: 180_000 }, () => {
  it('serve answers /healthz, delivers, and exits 0 on SIGTERM', async () => {
    const cfg = writeConfig(
      'serve.yaml',
      `server: { listen: "127.0.0.1:0" }\njobs: { poll_interval: 200ms }\nnotify:\n  webhook: { url: "${rx.url}/serve", secret: s3cret, topics: ["*"] }\n`,
    );
    const p = startProc(process.execPath, [BIN, 'serve', '-c', cfg], { DATABASE_URL: db.url });
    procs.push(p);
    const line = await p.waitForLine(/service\.listening/, STARTUP);
    const address = JSON.parse(line).address as string;
    const health = await fetch(`${address}/healthz`);
    expect(health.status).toBe(200);
    const n = await cli(['notify', 'serve.test', '--data', '{"mark":"serve-delivers"}', '-c', cfg], { DATABASE_URL: db.url });
    expect(n.code).toBe(0);
    const [id] = JSON.parse(n.stdout).job_ids as string[];
    // This notify's delivery (its data, to serve's URL) and its job completed: nothing older can pass for it.
    await waitFor(
      () => rx.requests.some((r) => r.url === '/serve' && JSON.parse(r.body.toString()).data?.mark === 'serve-delivers'),
      STARTUP,
    );
    await waitFor(
      async () => (await db.pool.query('select status from jobs where id = $1', [id])).rows[0]?.status === 'completed',
      STARTUP,
    );
    expect(await p.stop('SIGTERM')).toBe(0);
  });

  it('SIGTERM while notifies and deliveries are in flight: exit 0, every accepted event kept, no job left running', async () => {
    const token = 'svc-token-0123456789abcdef0123456789';
    const cfg = writeConfig(
      'sigterm.yaml',
      `server:\n  listen: "127.0.0.1:0"\n  auth: { users: [{ name: svc, role: service, token: "${token}" }] }\njobs: { poll_interval: 200ms, shutdown_grace: 1s }\nnotify:\n  webhook: { url: "${rx.url}/term", secret: s3cret, topics: ["*"] }\n`,
    );
    // Deliveries hang: the grace runs out with them in flight, and they must be handed back.
    rx.setResponder((r) => (r.url === '/term' ? { hang: true } : { status: 200 }));
    try {
      const p = startProc(process.execPath, [BIN, 'serve', '-c', cfg], { DATABASE_URL: db.url });
      procs.push(p);
      const address = JSON.parse(await p.waitForLine(/service\.listening/, STARTUP)).address as string;
      const post = (i: number) =>
        fetch(`${address}/v1/notify`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ topic: 'term.test', data: { i } }),
        }).then(
          async (r) => ({ status: r.status, body: (await r.json().catch(() => null)) as { event_id?: string } | null }),
          () => ({ status: 0, body: null }),
        );
      const early = await Promise.all(Array.from({ length: 5 }, (_, i) => post(i)));
      expect(early.map((r) => r.status)).toEqual([202, 202, 202, 202, 202]);
      await rx.waitForRequests(3, STARTUP);
      // More notifies on their way while the signal lands.
      const late = Array.from({ length: 20 }, (_, i) => post(100 + i));
      p.child.kill('SIGTERM');
      const answers = [...early, ...(await Promise.all(late))];
      expect(await p.exited).toBe(0);
      // Nothing refused with a 5xx other than 503 (unavailable while stopping), and every 202 kept.
      expect(answers.filter((a) => a.status >= 500 && a.status !== 503)).toEqual([]);
      const accepted = answers.filter((a) => a.status === 202).map((a) => a.body!.event_id!);
      const stored = (await db.pool.query<{ id: string }>('select id from events')).rows.map((r) => r.id);
      expect(stored).toEqual(expect.arrayContaining(accepted));
      expect((await db.pool.query(`select count(*)::int as n from jobs where event_id = any($1::uuid[])`, [accepted])).rows[0].n).toBe(
        accepted.length,
      );
      const jobs = (await db.pool.query<{ status: string; n: number }>(`select status, count(*)::int as n from jobs group by 1`)).rows;
      expect(jobs.filter((j) => j.status === 'running')).toEqual([]);
      // Handed back unspent: the hanging deliveries cost no attempt.
      expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'pending' and attempts > 0`)).rows[0].n).toBe(0);
    } finally {
      rx.setResponder(() => ({ status: 200 }));
    }
  });

  it('kill -9 during delivery, then a restart: the job is delivered and none is left running', async () => {
    const cfg = writeConfig(
      'kill.yaml',
      `server: { listen: "127.0.0.1:0" }\njobs:\n  poll_interval: 200ms\n  job_reaper: { interval: 300ms, lease_timeout: 1500ms }\nnotify:\n  webhook: { url: "${rx.url}/kill", secret: s3cret, topics: ["*"] }\n`,
    );
    let hang = true;
    rx.setResponder((r) => (r.url === '/kill' && hang ? { hang: true } : { status: 200 }));
    try {
      const a = startProc(process.execPath, [BIN, 'worker', '-c', cfg], { DATABASE_URL: db.url });
      procs.push(a);
      await a.waitForLine(/service\.listening/, STARTUP);
      const out = JSON.parse((await cli(['notify', 'kill.test', '-c', cfg], { DATABASE_URL: db.url })).stdout);
      const id = out.job_ids[0] as string;
      await waitFor(() => rx.requests.some((r) => r.url === '/kill'), STARTUP);
      await a.stop('SIGKILL');
      hang = false;
      const b = startProc(process.execPath, [BIN, 'worker', '-c', cfg], { DATABASE_URL: db.url });
      procs.push(b);
      // b reaps the job once a's lease (1.5 s) has run out, and delivers it.
      await b.waitForLine(/"job\.reaped"/, STARTUP);
      await waitFor(
        async () => (await db.pool.query('select status from jobs where id = $1', [id])).rows[0].status === 'completed',
        STARTUP,
      );
      expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'running'`)).rows[0].n).toBe(0);
      expect(b.lines.filter((l) => l.includes('"job.reaped"'))).toHaveLength(1);
      // The same delivery, sent by a (killed while it hung) and again by b.
      const sent = rx.requests.filter((r) => r.url === '/kill').map((r) => r.headers['x-acw-event-id']);
      expect(new Set(sent)).toEqual(new Set([id]));
      expect(sent.length).toBeGreaterThanOrEqual(2);
      expect(await b.stop('SIGTERM')).toBe(0);
    } finally {
      rx.setResponder(() => ({ status: 200 }));
    }
  });

  it('the last process using embedded PostgreSQL stops it, not the one that started it', async () => {
    const dataDir = join(dir, 'data-shared');
    cleanUpEmbedded(dataDir);
    const cfg = writeConfig('shared.yaml', `database: { data_dir: "${dataDir}" }\nserver: { listen: "127.0.0.1:0" }\n`);
    const pidFile = join(dataDir, 'pg', 'postmaster.pid');
    // migrate starts the server and, as its only user, stops it again.
    expect((await spawnCli(['migrate', '-c', cfg], { DATABASE_URL: '' })).code).toBe(0);
    expect(existsSync(pidFile)).toBe(false);
    // A follower of alerts starts it now (nothing runs); serve attaches to it.
    const follower = startProc(process.execPath, [BIN, 'alerts', '--follow', '-c', cfg], { DATABASE_URL: '' });
    procs.push(follower);
    // postmaster.pid: pid, data dir, start time, port, …, status ("ready" once it accepts connections).
    const server = () => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').split('\n') : []);
    await waitFor(() => server()[7]?.trim() === 'ready', 60_000);
    const first = `${server()[0]}:${server()[3]}`;
    const serve = startProc(process.execPath, [BIN, 'serve', '-c', cfg], { DATABASE_URL: '' });
    procs.push(serve);
    await serve.waitForLine(/service\.listening/, 60_000);
    // The one that started it goes first: the server stays up for serve, same process and port.
    expect(await follower.stop('SIGTERM')).toBe(0);
    expect(`${server()[0]}:${server()[3]}`).toBe(first);
    const n = await spawnCli(['notify', 'nobody.listens', '-c', cfg]);
    expect(n.code).toBe(0);
    expect(`${server()[0]}:${server()[3]}`).toBe(first);
    // serve is the last one: it stops the server it attached to.
    expect(await serve.stop('SIGTERM')).toBe(0);
    await waitFor(() => !existsSync(pidFile), 15_000);
  }, 120_000);

  it('with no database URL, serve starts embedded PostgreSQL and other commands attach to it', async () => {
    const dataDir = join(dir, 'data');
    cleanUpEmbedded(dataDir);
    const cfg = writeConfig('embedded.yaml', `database: { data_dir: "${dataDir}" }\nserver: { listen: "127.0.0.1:0" }\n`);
    // An empty DATABASE_URL counts as unset, even when the suite runs against an external server.
    const p = startProc(process.execPath, [BIN, 'serve', '-c', cfg], { DATABASE_URL: '' });
    procs.push(p);
    await p.waitForLine(/service\.listening/, 60_000);
    expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(true);
    const m = await spawnCli(['migrate', '-c', cfg]);
    expect(m).toMatchObject({ code: 0, stdout: 'up to date\n' });
    const n = await spawnCli(['notify', 'nobody.listens', '-c', cfg]);
    expect(JSON.parse(n.stdout)).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint' });
    expect(await p.stop('SIGTERM')).toBe(0);
    await waitFor(() => !existsSync(join(dataDir, 'pg', 'postmaster.pid')), 10_000);
    // As root below a private temp dir, the cluster lives under /var/tmp behind a symlink:
    // cleanUpEmbedded removes it.
  }, 90_000);
});
