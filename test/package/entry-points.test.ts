// The package as an application loads it: by its name, through package.json "exports", with Node's
// own ESM loader and the built dist/ (the other tests import src/ through vitest's loader). Runs on
// both Node versions of CI (vitest.runtime.config.ts): module resolution and loading are the
// runtime's.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHeaders } from '../../src/webhook/sign.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { name: string; exports: Record<string, unknown> };

/** The source module behind each entry point (dist/X.js is built from src/X.ts). */
const SOURCES: Record<string, string> = { '.': 'index', './client': 'client', './testing': 'testing', './verify': 'verify' };

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

/** Run an ES module in a fresh `node` whose working directory is the package (so its name resolves to itself). */
async function nodeModule(code: string, env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', code], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '', ...env },
  });
  return stdout;
}

describe('the entry points of package.json', () => {
  it('each names a source module', () => {
    expect(Object.keys(pkg.exports).toSorted()).toEqual(Object.keys(SOURCES).toSorted());
  });

  it('load by name in plain Node with the exports of their source; verify checks a signature, notify writes an event in a transaction', async () => {
    const body = '{"event_id":"e1","topic":"t.x","data":{"n":"Zoë"}}';
    const headers = buildHeaders({
      scheme: 'acw',
      secret: 's3cret',
      jobId: 'j1',
      topic: 't.x',
      body,
      timestamp: Math.floor(Date.now() / 1000),
    });
    const specifiers = Object.keys(SOURCES).map((k) => (k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`));
    const out = await nodeModule(
      `const specifiers = ${JSON.stringify(specifiers)};
       const names = {};
       for (const s of specifiers) names[s] = Object.keys(await import(s)).sort();
       const { verifyWebhook } = await import('${pkg.name}/verify');
       const verified = [verifyWebhook({ secret: 's3cret', headers: ${JSON.stringify(headers)}, body: ${JSON.stringify(body)} }),
         verifyWebhook({ secret: 's3cret', headers: ${JSON.stringify(headers)}, body: ${JSON.stringify(body + ' ')} })];
       const { notify } = await import('${pkg.name}');
       const { default: pg } = await import('pg');
       const client = new pg.Client({ connectionString: process.env.DB_URL });
       await client.connect();
       await client.query('begin');
       const eventId = await notify(client, 'entry.points', { from: 'node' });
       await client.query('commit');
       await client.end();
       process.stdout.write(JSON.stringify({ names, verified, eventId }));`,
      { DB_URL: db.url },
    );
    const { names, verified, eventId } = JSON.parse(out) as { names: Record<string, string[]>; verified: boolean[]; eventId: string };
    const expected: Record<string, string[]> = {};
    for (const [k, src] of Object.entries(SOURCES)) {
      expected[k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`] = Object.keys(await import(`../../src/${src}.ts`)).toSorted();
    }
    expect(names).toEqual(expected);
    expect(verified).toEqual([true, false]);
    const row = await db.pool.query<{ topic: string; data: unknown }>('select topic, data from events where id = $1', [eventId]);
    expect(row.rows).toEqual([{ topic: 'entry.points', data: { from: 'node' } }]);
  });
});
