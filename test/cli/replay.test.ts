// `endpoints replay` (docs/operations.md#replaying-an-endpoint): the same module as the API, run
// as the OS user; bad flags exit 2 naming the flag, an unknown endpoint exits 1, nothing written.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJob, rowCounts } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { runCliInProcess, type CliResult } from '../helpers/cli.js';

let db: TestDatabase;
let dir: string;
let configPath: string;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-replay-cli-'));
  configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    'notify:\n  webhook:\n    endpoints:\n      - { name: crm, url: "http://127.0.0.1:9/crm", secret: "${CRM_SECRET}", topics: ["crm.*"] }\n',
  );
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
});

async function cli(...args: string[]): Promise<CliResult> {
  // No CRM_SECRET: replay delivers nothing, so it runs without the endpoint's secret.
  return runCliInProcess([...args, '-c', configPath], { ...process.env, DATABASE_URL: db.url, USER: 'tester' });
}

describe('endpoints replay', () => {
  it('--dry-run prints the counts and changes nothing; without it the dead jobs are pending again, audited as cli:USER', async () => {
    const dead = [
      await insertJob(db.pool, { status: 'dead', endpoint: 'crm' }),
      await insertJob(db.pool, { status: 'dead', endpoint: 'crm' }),
    ];
    const completed = await insertJob(db.pool, { status: 'completed', endpoint: 'crm' });
    await insertJob(db.pool, { status: 'dead', endpoint: 'crm', createdAgoMs: 3 * 3600_000 });
    const counts = await rowCounts(db.pool);
    const dry = await cli('endpoints', 'replay', 'crm', '--since', '2h', '--dry-run');
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      endpoint: 'crm',
      status: 'dead',
      reset: 2,
      created: 0,
      unchanged: { completed: 1 },
      dry_run: true,
    });
    expect(await rowCounts(db.pool)).toEqual(counts);

    const real = await cli('endpoints', 'replay', 'crm', '--since', '2h');
    expect(real.code).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({ reset: 2, created: 0 });
    const rows = (await db.pool.query(`select id, status, attempts from jobs where id = any($1::uuid[])`, [[...dead, completed]])).rows;
    expect(rows.map((r) => [r.id, r.status, r.attempts]).toSorted()).toEqual(
      [
        [dead[0], 'pending', 0],
        [dead[1], 'pending', 0],
        [completed, 'completed', 3],
      ].toSorted(),
    );
    const audit = (await db.pool.query(`select actor, target_id from audit_log where action = 'endpoint.replay'`)).rows;
    expect(audit).toEqual([{ actor: 'cli:tester', target_id: 'crm' }]);
  }, 60_000);

  it('bad flags exit 2 naming the flag, an unknown endpoint exits 1 naming it; nothing is written', async () => {
    const counts = await rowCounts(db.pool);
    const cases: Array<[string[], number, string]> = [
      [['endpoints', 'replay', 'crm', '--since', 'soon'], 2, '--since:'],
      [['endpoints', 'replay', 'crm', '--since', '1h', '--until', '2h'], 2, '--since: must be earlier than until'],
      [['endpoints', 'replay', 'crm', '--since', '1h', '--until', '2026-02-30T25:00:00Z'], 2, '--until:'],
      [['endpoints', 'replay', 'crm', '--since', '1h', '--status', 'completed'], 2, '--status: expected "dead" or "all"'],
      [['endpoints', 'replay', 'crm'], 2, '--since'],
      [['endpoints', 'replay', 'nope', '--since', '1h'], 1, 'name: no endpoint named "nope"'],
    ];
    for (const [args, code, message] of cases) {
      const r = await cli(...args);
      expect({ args, code: r.code }).toEqual({ args, code });
      expect(r.stderr).toContain(message);
    }
    expect(await rowCounts(db.pool)).toEqual(counts);
  }, 120_000);
});
