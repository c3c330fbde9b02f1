import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startProc, type Proc } from '../helpers/procs.js';

// What a new user tripped over (issue 11): --listen in the logged config.

const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));
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
