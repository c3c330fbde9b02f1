// The CLI for people and for scripts (README.md#operator-cli): on a terminal the lists print aligned
// tables or short lines, and the redrive a sentence; piped, or with --json, the JSON lines scripts
// read, unchanged. In-process runs say "terminal" through their io (isTTY, columns); one real run
// under a pseudo-terminal (script(1)) checks that the binary asks its own stdout.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatTable } from '../../src/cli/table.js';
import { BIN, jsonLines, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const COLUMNS = 120;
let db: TestDatabase;
let dir: string;
let cfg: string;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-tables-'));
  cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, 'notify:\n  webhook: { url: "http://127.0.0.1:9/hook", secret: s3cret, topics: ["t.*"] }\n');
});
afterAll(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ ...process.env, DATABASE_URL: db.url });
const onTerminal = (...args: string[]): Promise<CliResult> => runCliInProcess([...args, '-c', cfg], env(), { tty: { columns: COLUMNS } });
const piped = (...args: string[]): Promise<CliResult> => runCliInProcess([...args, '-c', cfg], env());

/** A dead job with a long error, as the queue leaves one. */
async function deadJob(): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into jobs (id, type, payload, status, attempts, max_attempts, last_error, endpoint, completed_at)
     values ($1, 'webhook.deliver', '{"topic":"t.one"}', 'dead', 6, 6, $2, 'default', now())`,
    [id, `HTTP 500: ${'x'.repeat(200)}`],
  );
  return id;
}

describe('formatTable', () => {
  it('pads every column but the last to its widest cell, shows nothing as "-", and cuts a long line with "…"', () => {
    expect(
      formatTable(
        ['A', 'LONGER', 'LAST'],
        [
          ['x', null, 'end'],
          ['wide cell', true, 'multi\nline'],
        ],
      ),
    ).toEqual(['A          LONGER  LAST', 'x          -       end', 'wide cell  yes     multi line']);
    expect(formatTable(['A', 'B'], [['a', 'b'.repeat(50)]], 30)[1]).toBe(`a  ${'b'.repeat(26)}…`);
  });
});

describe('on a terminal', () => {
  it('endpoints show: the JSON, and on stderr what to do next for a down, failing or paused endpoint (nothing when healthy or piped)', async () => {
    await db.pool.query(`delete from endpoint_state where endpoint = 'default'`);
    expect((await onTerminal('endpoints', 'show', 'default')).stderr).toBe('');
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, circuit_since, opened_at, next_probe_at, last_error, last_error_at)
       values ('default', 'open', now(), now(), now() + interval '30 seconds', 'HTTP 503', now())`,
    );
    const down = await onTerminal('endpoints', 'show', 'default');
    expect(down.code).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ name: 'default', health: 'down' });
    expect(down.stderr).toMatch(
      /^default is down since \S+ \S+Z \(last error: HTTP 503\): .*Next probe \S+ \S+Z; or probe now.*: acw-webhooks endpoints resume default\n$/,
    );
    expect((await piped('endpoints', 'show', 'default')).stderr).toBe('');
    await db.pool.query(
      `update endpoint_state set circuit = 'closed', failing = true, failing_since = now(), failing_codes = '{422}' where endpoint = 'default'`,
    );
    expect((await onTerminal('endpoints', 'show', 'default')).stderr).toMatch(
      /^default is failing since .*\(422\).*send a test delivery: POST \/v1\/endpoints\/default\/test\n$/,
    );
    await db.pool.query(`update endpoint_state set failing = false, paused = true, paused_at = now() where endpoint = 'default'`);
    expect((await onTerminal('endpoints', 'show', 'default')).stderr).toMatch(/^default is paused since .*endpoints resume default\n$/);
    await db.pool.query(`delete from endpoint_state where endpoint = 'default'`);
  });

  it('users list: an aligned table, never wider than the terminal', async () => {
    expect((await piped('users', 'add', 'alice', '--role', 'viewer')).code).toBe(0);
    const r = await onTerminal('users', 'list');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const [head, ...rows] = r.stdout.trimEnd().split('\n');
    expect(head).toMatch(/^NAME\s+ROLE\s+CREATED\s+REVOKED$/);
    expect(rows).toContainEqual(expect.stringMatching(/^alice\s+viewer\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+-$/));
    expect(Math.max(...[head!, ...rows].map((l) => l.length))).toBeLessThanOrEqual(COLUMNS);
    // Aligned: ROLE starts at the same column on every line.
    expect(new Set([head!, ...rows].map((l) => l.search(/(ROLE|viewer|admin|service)/))).size).toBe(1);
  });

  it('alerts: "no alerts" when there are none, exit 0; then a row naming the job and its error', async () => {
    await db.pool.query('truncate audit_log cascade');
    expect(await onTerminal('alerts')).toEqual({ code: 0, stdout: 'no alerts\n', stderr: '' });
    expect((await piped('alerts')).stdout).toBe('');
    await db.pool.query(`insert into audit_log (action, actor, details) values ('webhook.dead_letter', 'system', $1)`, [
      { job_id: 'j-1', endpoint: 'default', last_error: 'HTTP 410' },
    ]);
    const lines = (await onTerminal('alerts')).stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+TIME\s+ACTION\s+STATE\s+ENDPOINT\s+DETAIL$/);
    expect(lines[1]).toMatch(/^\d+\s+\S+ \S+Z\s+webhook\.dead_letter\s+open\s+default\s+job j-1: HTTP 410$/);
  });

  it('jobs list and endpoints list: tables, a long error cut at the width', async () => {
    const id = await deadJob();
    const jobs = (await onTerminal('jobs', 'list', '--status', 'dead')).stdout.trimEnd().split('\n');
    expect(jobs[0]).toMatch(/^ID\s+STATUS\s+ENDPOINT\s+TOPIC\s+TRIES\s+WHEN\s+LAST ERROR$/);
    const row = jobs.find((l) => l.startsWith(id))!;
    expect(row).toMatch(/^\S+\s+dead\s+default\s+t\.one\s+6\/6\s+\S+ \S+Z\s+HTTP 500: x+…$/);
    expect(row).toHaveLength(COLUMNS);
    const eps = (await onTerminal('endpoints', 'list')).stdout.trimEnd().split('\n');
    expect(eps[0]).toMatch(/^NAME\s+STATE\s+HELD\s+OK\s+ATTEMPTS\s+LAST ERROR\s+URL$/);
    expect(eps[1]).toMatch(/^default\s+healthy\s+0\s+-\s+0 in 60m\s+-\s+http:\/\/127\.0\.0\.1:9\/hook$/);
  });

  it('jobs redrive --dry-run says so, and changes nothing; piped, its JSON line carries dry_run: true', async () => {
    await db.pool.query(`delete from jobs`);
    await deadJob();
    expect(await onTerminal('jobs', 'redrive', '--dry-run')).toEqual({
      code: 0,
      stdout: 'dry run: would re-queue 1 dead job\n',
      stderr: '',
    });
    expect(jsonLines((await piped('jobs', 'redrive', '--dry-run')).stdout)).toEqual([{ count: 1, dry_run: true }]);
    expect((await db.pool.query(`select status from jobs`)).rows).toEqual([{ status: 'dead' }]);
    expect(await onTerminal('jobs', 'redrive')).toEqual({ code: 0, stdout: 're-queued 1 dead job\n', stderr: '' });
  });

  it('status: the database in one line, then the processes (none yet)', async () => {
    const r = await onTerminal('status');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n').slice(0, 2)).toEqual([
      expect.stringMatching(/^database: postgres/),
      'no serve or worker process has run yet',
    ]);
  });
});

/** status's last_seen moves between two runs; everything else must be the same. */
const withoutLastSeen = (s: string) => s.replace(/"last_seen":"[^"]+"/g, '');

describe('for scripts', () => {
  it('piped, or --json on a terminal: the same JSON lines', async () => {
    await piped('users', 'add', 'carol', '--role', 'viewer');
    await deadJob();
    await db.pool.query(`insert into audit_log (action, actor, details) values ('webhook.dead_letter', 'system', '{}')`);
    for (const args of [['users', 'list'], ['jobs', 'list'], ['endpoints', 'list'], ['alerts'], ['status']]) {
      const out = await piped(...args);
      const json = await onTerminal(...args, '--json');
      expect({ args, code: out.code, json: json.stdout.startsWith('{') }).toEqual({ args, code: 0, json: true });
      expect(withoutLastSeen(json.stdout)).toBe(withoutLastSeen(out.stdout));
    }
  });

  it('the binary under a pseudo-terminal prints the table; through a pipe, JSON', async () => {
    await piped('users', 'add', 'dave', '--role', 'viewer');
    const sh = promisify(execFile);
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} users list -c ${JSON.stringify(cfg)}`;
    const tty = await sh('script', ['-qec', command, '/dev/null'], { env: env() });
    expect(tty.stdout.split(/\r?\n/)[0]).toMatch(/^NAME\s+ROLE\s+CREATED\s+REVOKED/);
    const pipe = await sh(process.execPath, [BIN, 'users', 'list', '-c', cfg], { env: env() });
    expect(pipe.stdout.startsWith('{"name":')).toBe(true);
  });
});

describe('the owner of what the CLI does', () => {
  it('is the OS user, from the account when the environment names none; never cli:unknown', async () => {
    const { USER: _u, LOGNAME: _l, ...rest } = process.env;
    const r = await runCliInProcess(['users', 'add', 'bob', '--role', 'viewer', '-c', cfg], { ...rest, DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    const row = await db.pool.query(`select actor from audit_log where target_id = 'bob' order by id desc limit 1`);
    expect(row.rows).toEqual([{ actor: `cli:${userInfo().username}` }]);
  });
});
