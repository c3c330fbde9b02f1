// The embedding example of docs/integrate.md (seed 003's workspace_fetch), taken from the markdown as
// written and run against a real database: the runner finds idle workspaces through its own config
// key, a repository is fetched and its job completes, a workspace whose directory is gone is retried
// and goes dead.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import type { Logger } from '../../src/log.js';
import type { Service } from '../../src/service.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { testConfig } from '../helpers/service.js';

const DOC = fileURLToPath(new URL('../../docs/integrate.md', import.meta.url));
const INDEX = pathToFileURL(fileURLToPath(new URL('../../src/index.ts', import.meta.url))).href;

let db: TestDatabase;
let dir: string;
let svc: Service | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-integrate-doc-'));
  // The application's own table, as the example reads it: one idle repository, one gone, one busy.
  execFileSync('git', ['init', '-q', join(dir, 'repo')]);
  await db.pool.query(`create table workspaces (id int primary key, path text not null, last_used_at timestamptz not null)`);
  await db.pool.query(
    `insert into workspaces values (1, $1, now() - interval '1 hour'), (2, $2, now() - interval '1 hour'), (3, $1, now())`,
    [join(dir, 'repo'), join(dir, 'gone')],
  );
});

afterAll(async () => {
  await svc?.stop();
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('runs as written: idle workspaces fetched (completed), a missing directory retried then dead, a busy one left alone', async () => {
  const code = /<!-- example: workspace-fetch.ts -->\n```ts\n([\s\S]*?)\n```/.exec(readFileSync(DOC, 'utf8'))?.[1];
  if (!code) throw new Error('docs/integrate.md: no workspace-fetch.ts example');
  // The only change: the package's own source stands in for the published `acw-webhooks`.
  const file = join(dir, 'workspace-fetch.ts');
  writeFileSync(file, code.replace("from 'acw-webhooks'", `from '${INDEX}'`));
  const mod = (await import(pathToFileURL(file).href)) as { startService(config: Config, log: Logger): Promise<Service> };

  const config = testConfig(db, { jobs: { workspace_fetch: { enabled: true, interval: '1h', idle_minutes: 10 } } });
  const logs = captureLogs();
  svc = await mod.startService(config, logs.log);
  const jobs = async () =>
    (
      await db.pool.query<{ ws: number; status: string; attempts: number }>(
        `select (payload->>'workspace_id')::int as ws, status, attempts from jobs where type = 'workspace.fetch' order by 1`,
      )
    ).rows;
  const done = await waitFor(async () => {
    const rows = await jobs();
    return rows.length === 2 && rows.every((r) => r.status === 'completed' || r.status === 'dead') ? rows : undefined;
  }, 20_000);
  expect(done).toEqual([
    { ws: 1, status: 'completed', attempts: 1 },
    { ws: 2, status: 'dead', attempts: 5 },
  ]);
  // The seed's block has a runner here: no "no runner named" warning for it.
  expect(logs.events('config.warning').filter((l) => l.key === 'jobs.workspace_fetch')).toEqual([]);
});
