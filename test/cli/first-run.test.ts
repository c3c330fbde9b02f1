import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BIN, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startProc, type Proc } from '../helpers/procs.js';
import { captureLogs } from '../helpers/logs.js';
import { bootstrapUsers } from '../../src/users.js';

// What a new user tripped over (issue 11): secrets a command does not use, an unmigrated database, --listen in the logged config.

/** A command run in this process, with the test run's environment less DATABASE_URL and WEBHOOK_SECRET, and `env`. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const { DATABASE_URL: _ignored, WEBHOOK_SECRET: _unset, ...base } = process.env;
  return runCliInProcess(args, { ...base, ...env });
}

let dir: string;
let db: TestDatabase;
const procs: Proc[] = [];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'acw-first-run-'));
  db = await createTestDatabase();
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
});
afterAll(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const withSecret = () =>
  writeConfig(
    'secret.yaml',
    'notify:\n  webhook:\n    url: http://127.0.0.1:9/hook\n    secret: ${WEBHOOK_SECRET}\n    topics: ["cli.*"]\n',
  );

describe('commands that do not deliver need no delivery secret', () => {
  it('jobs list, users list, alerts, migrate and notify run with WEBHOOK_SECRET unset', async () => {
    const cfg = withSecret();
    const env = { DATABASE_URL: db.url };
    for (const args of [['jobs', 'list'], ['users', 'list'], ['alerts'], ['migrate']]) {
      const r = await cli([...args, '-c', cfg], env);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
    }
    // notify writes the job; the workers that send it sign with their own config's secret.
    const n = await cli(['notify', 'cli.hello', '-c', cfg], env);
    expect(n.code).toBe(0);
    expect(JSON.parse(n.stdout).job_ids).toHaveLength(1);
  });

  it('config check, serve and worker still refuse it, naming the variable', async () => {
    const cfg = withSecret();
    for (const cmd of ['config check', 'serve', 'worker']) {
      const r = await cli([...cmd.split(' '), '-c', cfg, ...(cmd === 'config check' ? [] : ['--listen', '127.0.0.1:0'])], {
        DATABASE_URL: db.url,
      });
      expect({ cmd, code: r.code }).toEqual({ cmd, code: 2 });
      expect(r.stderr).toContain('notify.webhook.secret: environment variable WEBHOOK_SECRET is not set');
    }
  });
});

describe('a database that is not migrated', () => {
  it('is named, with the command that fixes it, instead of relation "jobs" does not exist (exit 1)', async () => {
    const empty = await createTestDatabase({ migrated: false });
    try {
      const cfg = writeConfig('empty.yaml', '');
      for (const args of [['jobs', 'list'], ['users', 'list'], ['alerts'], ['alerts', '--follow'], ['notify', 'a.b']]) {
        const r = await cli([...args, '-c', cfg], { DATABASE_URL: empty.url });
        expect({ args, code: r.code }).toEqual({ args, code: 1 });
        expect(r.stderr).toContain(`database ${empty.name} on `);
        expect(r.stderr).toContain('is not migrated');
        expect(r.stderr).toContain('acw-webhooks migrate');
        expect(r.stderr).not.toContain('does not exist');
      }
      expect((await cli(['migrate', '-c', cfg], { DATABASE_URL: empty.url })).code).toBe(0);
      expect(await cli(['jobs', 'list', '-c', cfg], { DATABASE_URL: empty.url })).toMatchObject({ code: 0, stderr: '' });
    } finally {
      await empty.drop();
    }
  });
});

describe('serve --listen', () => {
  it('the effective config logged at start (service.config) shows the override', async () => {
    const cfg = writeConfig('listen.yaml', 'server: { listen: "127.0.0.1:1" }\n');
    const p = startProc(process.execPath, [BIN, 'serve', '-c', cfg, '--listen', '127.0.0.1:0'], { DATABASE_URL: db.url });
    procs.push(p);
    const logged = JSON.parse(await p.waitForLine(/"service\.config"/)) as { config: { server: { listen: string } } };
    expect(logged.config.server.listen).toBe('127.0.0.1:0');
    // Its exit code is cli.test.ts's business (and racy here: SIGTERM may land before serve installs its handler).
    await p.stop('SIGTERM');
  });
});

describe('a start with the example config', () => {
  it('says nothing at info about the bootstrap user whose token is unset (users.bootstrap_skipped is debug)', async () => {
    const logs = captureLogs('debug');
    await bootstrapUsers(db.pool, [{ name: 'ops', role: 'admin', token: '' }], logs.log);
    expect(logs.events('users.bootstrap_skipped').map((l) => [l.level, l['user']])).toEqual([[20, 'ops']]);
  });
});
