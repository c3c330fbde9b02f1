import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { channels, quoteIdent } from '../../src/db/sql.js';
import { rowCounts } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { jsonLines, runCliInProcess, type CliResult } from '../helpers/cli.js';

// `endpoints list|pause|resume` (docs/operations.md#pausing-an-endpoint): the same module as the API.

let db: TestDatabase;
let dir: string;
let configPath: string;
let listener: pg.Client;
const notified: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-endpoints-'));
  configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    [
      'notify:',
      '  webhook:',
      '    url: http://127.0.0.1:9/default',
      '    secret: default-secret-0123',
      '    topics: ["a.*"]',
      '    allow_networks: ["127.0.0.0/8"]',
      '    endpoints:',
      '      - { name: crm, url: "http://127.0.0.1:9/crm", secret: crm-secret-4567, topics: ["crm.*"], rate_limit: 20/s }',
      '',
    ].join('\n'),
  );
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (m) => notified.push(m.payload ?? ''));
  await listener.query(`listen ${quoteIdent(channels('public').endpoints)}`);
});
afterAll(async () => {
  await listener.end();
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, audit_log, endpoint_state cascade');
  notified.length = 0;
});

/** The key stored endpoints' secrets are sealed with (an external database has no key file). */
const KEY = Buffer.alloc(32, 7).toString('base64');

async function cli(...args: string[]): Promise<CliResult> {
  return cliEnv({ ACW_ENCRYPTION_KEY: KEY }, ...args);
}

async function cliEnv(extra: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return runCliInProcess([...args, '-c', configPath], { ...process.env, DATABASE_URL: db.url, USER: 'tester', ...extra });
}
const lines = jsonLines;
const counts = async () => ({
  ...(await rowCounts(db.pool)),
  endpoint_state: (await db.pool.query(`select count(*)::int as n from endpoint_state`)).rows[0].n as number,
});

/** The stored propagate_trace of endpoint `traced`. */
const stored = async () =>
  (await db.pool.query<{ p: boolean | null }>(`select propagate_trace as p from endpoints where name = 'traced'`)).rows[0]?.p;

describe('endpoints CLI', () => {
  it('pause and resume: one JSON line each, audited as the OS user, announced; a second pause changes nothing', async () => {
    const paused = await cli('endpoints', 'pause', 'crm');
    expect(paused.code).toBe(0);
    expect(lines(paused.stdout)).toEqual([expect.objectContaining({ name: 'crm', paused: true, paused_by: 'cli:tester', changed: true })]);
    await waitFor(() => notified.includes('crm'));

    const before = await counts();
    const again = await cli('endpoints', 'pause', 'crm');
    expect(again.code).toBe(0);
    expect(lines(again.stdout)[0]).toMatchObject({ paused: true, changed: false });
    expect(await counts()).toEqual(before);

    const resumed = await cli('endpoints', 'resume', 'crm');
    expect(resumed.code).toBe(0);
    expect(lines(resumed.stdout)[0]).toMatchObject({ name: 'crm', paused: false, paused_by: null, changed: true });
    const audit = (await db.pool.query(`select action, actor, target_id from audit_log order by id`)).rows;
    expect(audit).toEqual([
      { action: 'endpoint.paused', actor: 'cli:tester', target_id: 'crm' },
      { action: 'endpoint.resumed', actor: 'cli:tester', target_id: 'crm' },
    ]);
    await waitFor(() => notified.filter((n) => n === 'crm').length === 2);
  });

  it('resume on an open circuit makes its probe due now', async () => {
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, opened_at, next_probe_at, consecutive_failures) values ('default', 'open', now(), now() + interval '1 hour', 10)`,
    );
    const res = await cli('endpoints', 'resume', 'default');
    expect(res.code).toBe(0);
    expect(lines(res.stdout)[0]).toMatchObject({ name: 'default', changed: true, circuit: { state: 'open', consecutive_failures: 10 } });
    const due = await db.pool.query(`select next_probe_at <= now() as due from endpoint_state where endpoint = 'default'`);
    expect(due.rows).toEqual([{ due: true }]);
  });

  it('an unknown endpoint exits 1 naming it and writes nothing', async () => {
    const before = await counts();
    for (const action of ['pause', 'resume']) {
      const res = await cli('endpoints', action, 'nope');
      expect(res.code).toBe(1);
      expect(res.stderr).toMatch(/^name: no endpoint named "nope"/);
      expect(res.stdout).toBe('');
    }
    await listener.query('select 1');
    expect(notified).toEqual([]);
    expect(await counts()).toEqual(before);
  });

  it('list prints each endpoint view as a JSON line, without per-process fields or secrets', async () => {
    await cli('endpoints', 'pause', 'crm');
    await db.pool.query(
      `insert into jobs (type, payload, endpoint, run_at) values ('webhook.deliver', '{}', 'crm', now() - interval '1 second')`,
    );
    const res = await cli('endpoints', 'list');
    expect(res.code).toBe(0);
    const [def, crm] = lines(res.stdout);
    expect(def).toMatchObject({ name: 'default', paused: false, circuit: { state: 'closed' }, rate_limit: null, held_jobs: 0 });
    expect(crm).toMatchObject({ name: 'crm', paused: true, rate_limit: 20, held_jobs: 1, adaptive_limit: null, in_flight: null });
    expect(res.stdout).not.toContain('secret-');
    expect((await cli('endpoints', 'list', '--window-minutes', '0')).code).toBe(2);
  });

  it('add, show, update and remove a stored endpoint; the secret is printed once and stored sealed', async () => {
    const added = await cli(
      'endpoints',
      'add',
      'hooks',
      '--url',
      'http://127.0.0.1:9/hooks',
      '--topics',
      'x.*,y.z',
      '--header',
      'X-Team=ops',
    );
    expect(added.code).toBe(0);
    const [view] = lines(added.stdout);
    expect(view).toMatchObject({ name: 'hooks', source: 'api', owner: 'cli:tester', topics: ['x.*', 'y.z'] });
    expect(typeof view!.secret).toBe('string');
    const row = await db.pool.query<{ secret: string }>(`select secret from endpoints where name = 'hooks'`);
    expect(row.rows[0]!.secret).toMatch(/^v1:/);
    expect(row.rows[0]!.secret).not.toContain(view!.secret);
    const shown = await cli('endpoints', 'show', 'hooks');
    expect(lines(shown.stdout)[0]).toMatchObject({ name: 'hooks' });
    expect(shown.stdout).not.toContain(view!.secret);
    const updated = await cli('endpoints', 'update', 'hooks', '--topics', 'x.*', '--rate-limit', '5/s', '--disabled');
    expect(updated.code).toBe(0);
    expect(lines(updated.stdout)[0]).toMatchObject({ topics: ['x.*'], rate_limit: 5, enabled: false });
    const removed = await cli('endpoints', 'remove', 'hooks', '--force');
    expect(lines(removed.stdout)[0]).toEqual({ name: 'hooks', deleted: true, cancelled_jobs: 0 });
    const audit = await db.pool.query<{ action: string; actor: string }>(
      `select action, actor from audit_log where target_id = 'hooks' order by id`,
    );
    expect(audit.rows).toEqual([
      { action: 'endpoint.created', actor: 'cli:tester' },
      { action: 'endpoint.updated', actor: 'cli:tester' },
      { action: 'endpoint.deleted', actor: 'cli:tester' },
    ]);
  });

  it('--propagate-trace, --no-propagate-trace and --propagate-trace-default set, unset and clear the stored setting', async () => {
    const added = await cli('endpoints', 'add', 'traced', '--url', 'http://127.0.0.1:9/t', '--topics', 'x.*', '--propagate-trace');
    expect(added.code).toBe(0);
    expect(lines(added.stdout)[0]).toMatchObject({ propagate_trace: true });
    expect(await stored()).toBe(true);
    const off = await cli('endpoints', 'update', 'traced', '--no-propagate-trace');
    expect(lines(off.stdout)[0]).toMatchObject({ propagate_trace: false });
    expect(await stored()).toBe(false);
    const both = await cli('endpoints', 'update', 'traced', '--propagate-trace', '--propagate-trace-default');
    expect({ code: both.code, stderr: both.stderr }).toEqual({
      code: 2,
      stderr: expect.stringMatching(/^--propagate-trace-default: not with --propagate-trace or --no-propagate-trace/),
    });
    expect(await stored()).toBe(false);
    const cleared = await cli('endpoints', 'update', 'traced', '--propagate-trace-default');
    expect(lines(cleared.stdout)[0]).toMatchObject({ propagate_trace: null });
    expect(await stored()).toBe(null);
    // A flag not given leaves it as it is.
    await cli('endpoints', 'update', 'traced', '--propagate-trace');
    await cli('endpoints', 'update', 'traced', '--description', 'kept');
    expect(await stored()).toBe(true);
    await cli('endpoints', 'remove', 'traced', '--force');
  });

  it('a chosen secret comes from --secret-file; --secret still works, warned about, the warning never showing it', async () => {
    const file = join(dir, 'chosen.secret');
    writeFileSync(file, 'chosen-secret-from-a-file-0123\nignored second line\n');
    const added = await cli('endpoints', 'add', 'filed', '--url', 'http://127.0.0.1:9/filed', '--topics', 'x.*', '--secret-file', file);
    expect({ code: added.code, stderr: added.stderr }).toEqual({ code: 0, stderr: '' });
    expect(lines(added.stdout)[0]!.secret).toBe('chosen-secret-from-a-file-0123');

    writeFileSync(file, 'rotated-secret-from-a-file-4567\n');
    const rotated = await cli('endpoints', 'rotate-secret', 'filed', '--secret-file', file);
    expect({ code: rotated.code, stderr: rotated.stderr }).toEqual({ code: 0, stderr: '' });
    expect(lines(rotated.stdout)[0]).toMatchObject({ secret_next: 'rotated-secret-from-a-file-4567', generated: false });

    const typed = await cli(
      'endpoints',
      'add',
      'typed',
      '--url',
      'http://127.0.0.1:9/typed',
      '--topics',
      'x.*',
      '--secret',
      'typed-secret-0123456789',
    );
    expect(typed.code).toBe(0);
    expect(lines(typed.stdout)[0]!.secret).toBe('typed-secret-0123456789');
    expect(typed.stderr).toMatch(/^warning: --secret shows the secret to every user of this host \(ps\).*use --secret-file FILE\n$/);
    expect(typed.stderr).not.toContain('typed-secret');

    // Misuse: exit 2 naming the flag, nothing written.
    const before = await counts();
    writeFileSync(join(dir, 'empty.secret'), '\n');
    for (const [args, message] of [
      [['--secret-file', join(dir, 'missing.secret')], /^--secret-file: cannot read .*missing\.secret: ENOENT/],
      [['--secret-file', join(dir, 'empty.secret')], /^--secret-file: .*empty\.secret is empty/],
      [['--secret-file', file, '--secret', 'x'.repeat(20)], /^--secret and --secret-file: give one of them/],
    ] as const) {
      const res = await cli('endpoints', 'add', 'misused', '--url', 'http://127.0.0.1:9/m', '--topics', 'x.*', ...args);
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(message);
    }
    expect(await counts()).toEqual(before);
  });

  it("misuse exits 2 with the API's message and writes nothing; no key exits 1 naming it", async () => {
    const before = await counts();
    for (const [args, message] of [
      [['--url', 'ftp://127.0.0.1/x', '--topics', 'a.b'], /^url: expected an http or https URL/],
      [['--url', 'http://127.0.0.1:9/x', '--topics', 'Bad'], /^topics\[0\]: expected a topic/],
      [['--url', 'http://127.0.0.1:9/x', '--topics', 'a.b', '--timeout', '90s'], /^timeout: must be from 100ms to 60s/],
      [['--url', 'http://10.0.0.1/x', '--topics', 'a.b'], /^url: /],
    ] as const) {
      const res = await cli('endpoints', 'add', 'bad', ...args);
      expect({ code: res.code, stderr: res.stderr }).toMatchObject({ code: 2 });
      expect(res.stderr).toMatch(message);
    }
    const nokey = await cliEnv({ ACW_ENCRYPTION_KEY: '' }, 'endpoints', 'add', 'nokey', '--url', 'http://127.0.0.1:9/x', '--topics', 'a.b');
    expect(nokey.code).toBe(1);
    expect(nokey.stderr).toMatch(/secrets.encryption_key is not set/);
    expect(await counts()).toEqual(before);
  });
});
