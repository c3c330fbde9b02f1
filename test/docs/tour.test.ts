// README.md "A 60-second tour", run as written on a fresh database: its ```sh blocks are taken from
// the markdown, so this breaks when the tour changes. The only substitutions are what a test
// cannot share with a person at a terminal: `npx acw-webhooks` is the built binary, the ports
// 9000 and 8080 are free ones, and the database is this test's own (DATABASE_URL, unmigrated, with
// an encryption key in the environment, as an embedded server would have in its key file).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));
const sh = promisify(execFile);

/** The ```sh blocks of the README section titled `title`, in order. */
function shBlocks(title: string): string[] {
  const text = readFileSync(README, 'utf8');
  const start = text.indexOf(`## ${title}\n`);
  if (start < 0) throw new Error(`README.md: no section "${title}"`);
  const end = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** Commands of a block, one per entry: continuation lines joined, comments dropped. */
function commands(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

let db: TestDatabase;
let dir: string;
const procs: Proc[] = [];
let env: Record<string, string>;
let subst: (text: string) => string;

beforeAll(async () => {
  db = await createTestDatabase({ migrated: false });
  dir = mkdtempSync(join(tmpdir(), 'acw-tour-'));
  const [rxPort, apiPort] = [await freePort(), await freePort()];
  subst = (text) =>
    text
      .replace(/^npm start$/m, `exec npx acw-webhooks serve --listen 127.0.0.1:${apiPort}`)
      .replaceAll('npx acw-webhooks', `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`)
      .replaceAll('127.0.0.1:9000', `127.0.0.1:${rxPort}`)
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${apiPort}`);
  const { DATABASE_URL: _url, ACW_CONFIG: _cfg, ...base } = process.env as Record<string, string>;
  env = { ...base, DATABASE_URL: db.url, ACW_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
});

afterAll(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One command in the tour's directory, as a shell runs it; its stdout. */
async function run(command: string, extraEnv: Record<string, string> = {}): Promise<string> {
  const { stdout } = await sh('sh', ['-c', command], { cwd: dir, env: { ...env, ...extraEnv }, timeout: 60_000 });
  return stdout;
}

// The tour's four shell blocks (a receiver, the service, then commands), run one after another:
// 30 s, the default, ran out on a loaded CI machine; each command has 60 s of its own.
it(
  'runs as written: the receiver gets both endpoints verified, the saved copy verifies, the service warns once about allow_networks',
  { timeout: 180_000 },
  async () => {
    const [receiver, service, third, verify, ...rest] = shBlocks('A 60-second tour').map((b) => subst(b));
    expect(rest).toEqual([]);

    // First terminal: the receiver, which runs until stopped.
    // exec (after any VAR=value): the shell becomes the receiver, so stopping it stops the receiver.
    const [rxCommand, ...rxMore] = commands(receiver!);
    expect(rxMore).toEqual([]);
    const rx = startProc('sh', ['-c', rxCommand!.replace(/^((?:\w+=\S+\s+)*)/, '$1exec ')], env, { cwd: dir });
    procs.push(rx);
    await rx.waitForLine(/listening on/);

    // Second: the config file, then the service in the foreground (`npm start` in the tour).
    const svc = startProc('sh', ['-c', service!], env, { cwd: dir });
    procs.push(svc);
    await svc.waitForLine(/"event":"service.listening"/, 60_000);

    // Third, a command at a time, as typed: the token exported, the secret's file written, the
    // endpoint added with it, the event sent.
    const [exportToken, secretFile, addEndpoint, notify, ...more] = commands(third!);
    expect(more).toEqual([]);
    const token = await run(`${exportToken!}; printf %s "$ACW_TOKEN"`);
    expect(token).toMatch(/^\S{20,}$/);
    await run(secretFile!);
    const added = JSON.parse(await run(addEndpoint!, { ACW_TOKEN: token })) as { name: string; url: string };
    expect(added).toMatchObject({ name: 'audit' });
    // A person types the next line after the service has loaded it (within a second); wait as long.
    await waitFor(async () => (await fetch(`${apiUrl(notify!)}/v1/endpoints/audit`, { headers: auth(token) })).ok, 15_000);
    const answer = JSON.parse(await run(notify!, { ACW_TOKEN: token })) as { job_ids: string[] };
    expect(answer.job_ids).toHaveLength(2);

    // The receiver prints one verified line per endpoint, each saved.
    const lines = await waitFor(() => {
      const got = rx.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      return got.length >= 2 ? got : undefined;
    }, 30_000);
    expect(lines.map((l) => [l['path'], l['verified'], typeof l['saved']]).toSorted()).toEqual([
      ['/audit', true, 'string'],
      ['/hook', true, 'string'],
    ]);

    // The saved copy verifies as a receiver would.
    expect(JSON.parse(await run(commands(verify!).join('\n')))).toMatchObject({ valid: true, scheme: 'acw' });

    // allow_networks opens loopback: one warning at start, naming the key and the range.
    const warnings = svc.lines.filter((l) => l.includes('"event":"config.warning"') && l.includes('notify.webhook.allow_networks'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('127.0.0.0/8 (loopback)');
  },
);

/** http://127.0.0.1:PORT of the notify command. */
function apiUrl(command: string): string {
  return /http:\/\/127\.0\.0\.1:\d+/.exec(command)![0];
}

function auth(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
