// The verification recipes of docs/receivers.md, taken from the markdown as written and run
// against real deliveries of a running service: a recipe that stops verifying fails here.
// Recipes whose toolchain is not installed (go, php, ruby) are skipped, by name, unless
// ACW_REQUIRE_TOOLCHAINS=1 (.ci/run) makes that a failure (toolchains.ts).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notifyNow } from '../../src/notify/notify.js';
import type { Service } from '../../src/service.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';
import { requireTool, skipWithout } from './toolchains.js';

const DOC = fileURLToPath(new URL('../../docs/receivers.md', import.meta.url));
const VERIFY_SRC = fileURLToPath(new URL('../../src/verify.ts', import.meta.url));
const SECRET = 'receiver-doc-secret-Zoë-1';
const OLD = 'receiver-doc-old-secret';
const NEW = 'receiver-doc-new-secret';
const WHSEC = `whsec_${Buffer.from('receiver-doc-standard-key-0123').toString('base64')}`;

/** The fenced block after each `<!-- recipe: NAME -->` marker. */
export function recipes(markdown: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of markdown.matchAll(/<!-- recipe: ([\w.]+) -->\n```\w+\n([\s\S]*?)\n```/g)) out.set(m[1]!, `${m[2]!}\n`);
  return out;
}

const RECIPES = recipes(readFileSync(DOC, 'utf8'));
/** How each recipe file runs on a saved delivery (`<prefix>.body` and `.headers`). */
const RUNNERS: { file: string; tool: string; pkg: string; cmd: (file: string) => string[] }[] = [
  { file: 'verify.py', tool: 'python3', pkg: 'python3', cmd: (f) => ['python3', f] },
  { file: 'verify.sh', tool: 'openssl', pkg: 'openssl', cmd: (f) => ['sh', f] },
  { file: 'verify.go', tool: 'go', pkg: 'golang-go', cmd: (f) => ['go', 'run', f] },
  { file: 'verify.php', tool: 'php', pkg: 'php-cli', cmd: (f) => ['php', f] },
  { file: 'verify.rb', tool: 'ruby', pkg: 'ruby', cmd: (f) => ['ruby', f] },
];

let db: TestDatabase;
let svc: Service;
let rx: Receiver;
let tsServer: Server;
let dir: string;
/** Saved deliveries by endpoint name: the path prefix, as `acw-webhooks receive --save` writes them. */
const saved = new Map<string, string>();
const jobIds = new Map<string, string>();

/** Writes a delivery as `receive --save` does: the raw body, and `Name: value` lines as received. */
function save(name: string, req: ReceivedRequest): string {
  const prefix = join(dir, name);
  writeFileSync(`${prefix}.body`, req.body);
  const lines: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\n`);
  writeFileSync(`${prefix}.headers`, lines.join(''));
  return prefix;
}

beforeAll(async () => {
  const names = [...RECIPES.keys()].toSorted().join(' ');
  if (names !== 'verify.go verify.php verify.py verify.rb verify.sh verify.ts verify_standard.py')
    throw new Error(`recipes found: ${names}`);
  dir = mkdtempSync(join(tmpdir(), 'acw-receivers-doc-'));
  for (const [file, code] of RECIPES) {
    // The only change: the package's own source stands in for the published `acw-webhooks/verify`.
    writeFileSync(
      join(dir, file),
      file.endsWith('.ts') ? code.replace("'acw-webhooks/verify'", `'${pathToFileURL(VERIFY_SRC).href}'`) : code,
    );
  }
  // The TypeScript recipe is the receiver itself: the service delivers to its handler.
  const mod = (await import(pathToFileURL(join(dir, 'verify.ts')).href)) as { handle: Parameters<typeof createServer>[1] };
  tsServer = createServer(mod.handle);
  await new Promise<void>((resolve) => tsServer.listen(0, '127.0.0.1', resolve));
  const tsUrl = `http://127.0.0.1:${(tsServer.address() as AddressInfo).port}/hook`;
  process.env.WEBHOOK_SECRET = SECRET;
  delete process.env.WEBHOOK_SECRET_NEXT;

  db = await createTestDatabase();
  rx = await startReceiver();
  const far = new Date(Date.now() + 3600_000).toISOString();
  const ep = (name: string, more: Record<string, unknown>) => ({ name, url: `${rx.url}/${name}`, topics: ['docs.*'], ...more });
  ({ svc } = await startTestService(db, {
    jobs: { max_attempts: 1 },
    notify: {
      webhook: {
        endpoints: [
          ep('plain', { secret: SECRET }),
          ep('rotating', { secret: OLD, secret_next: NEW, rotate_until: far }),
          ep('standard', { secret: WHSEC, scheme: 'standard' }),
          ep('ts-ok', { secret: SECRET, url: tsUrl }),
          ep('ts-rotating', { secret: OLD, secret_next: SECRET, rotate_until: far, url: tsUrl }),
          ep('ts-wrong', { secret: 'not-the-receivers-secret', url: tsUrl }),
        ],
      },
    },
  }));
  const answer = await notifyNow(
    svc.db.pool,
    { topic: 'docs.receivers', data: { workspace_id: 42, note: 'naïve café ✓', list: [1, 'two', null] } },
    'tester',
    svc.fanOutContext,
  );
  const rows = await db.pool.query<{ id: string; endpoint: string }>('select id, endpoint from jobs where id = any($1::uuid[])', [
    answer.body.job_ids,
  ]);
  for (const r of rows.rows) jobIds.set(r.endpoint, r.id);
  const got = await rx.waitForRequests(3, 20_000);
  for (const req of got) saved.set(req.url.slice(1), save(req.url.slice(1), req));
  // A copy of the plain delivery with one byte of the body changed.
  const tampered = join(dir, 'tampered');
  writeFileSync(`${tampered}.body`, readFileSync(`${saved.get('plain')}.body`, 'utf8').replace('42', '43'));
  writeFileSync(`${tampered}.headers`, readFileSync(`${saved.get('plain')}.headers`));
  saved.set('tampered', tampered);
}, 60_000);

afterAll(async () => {
  await svc?.stop();
  await rx?.close();
  await new Promise((resolve) => (tsServer ? tsServer.close(resolve) : resolve(undefined)));
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  delete process.env.WEBHOOK_SECRET;
});

/** Runs a recipe on a saved delivery with the given secrets: 'verified' (exit 0) or 'rejected' (exit 1). */
function run(cmd: string[], delivery: string, secret: string, next?: string): string {
  const env = { ...process.env, WEBHOOK_SECRET: secret, WEBHOOK_SECRET_NEXT: next ?? '' };
  const r = spawnSync(cmd[0]!, [...cmd.slice(1), saved.get(delivery)!], { env, encoding: 'utf8', timeout: 120_000, cwd: dir });
  const out = r.stdout.trim();
  if (!((out === 'verified' && r.status === 0) || (out === 'rejected' && r.status === 1))) {
    throw new Error(`${cmd.join(' ')} exited ${r.status}: ${out} ${r.stderr}`);
  }
  return out;
}

describe.each(RUNNERS)('$file', ({ file, tool, pkg, cmd }) => {
  it.skipIf(skipWithout(tool))(`accepts a real delivery with its secret, rejects a wrong secret and a changed body (${tool})`, () => {
    requireTool(tool, pkg);
    const c = cmd(join(dir, file));
    expect(run(c, 'plain', SECRET)).toBe('verified');
    expect(run(c, 'plain', 'wrong-secret')).toBe('rejected');
    expect(run(c, 'tampered', SECRET)).toBe('rejected');
    // The acw recipes do not take a Standard Webhooks delivery.
    expect(run(c, 'standard', WHSEC)).toBe('rejected');
  });
  it.skipIf(skipWithout(tool))('during a rotation accepts the old secret, the new one (X-ACW-Signature-Next), or both', () => {
    requireTool(tool, pkg);
    const c = cmd(join(dir, file));
    expect(run(c, 'rotating', OLD)).toBe('verified');
    expect(run(c, 'rotating', NEW)).toBe('verified');
    expect(run(c, 'rotating', 'wrong-secret', NEW)).toBe('verified');
    expect(run(c, 'rotating', 'wrong-secret', 'also-wrong')).toBe('rejected');
  });
});

describe('verify_standard.py', () => {
  it('accepts a real Standard Webhooks delivery, and rejects another key and an acw delivery', () => {
    const c = ['python3', join(dir, 'verify_standard.py')];
    expect(run(c, 'standard', WHSEC)).toBe('verified');
    expect(run(c, 'standard', `whsec_${Buffer.from('another-key').toString('base64')}`)).toBe('rejected');
    expect(run(c, 'plain', WHSEC)).toBe('rejected');
  });
});

const status = async (endpoint: string) =>
  (await db.pool.query<{ status: string }>('select status from jobs where id = $1', [jobIds.get(endpoint)])).rows[0]?.status;

describe('verify.ts (the receiver the service delivers to)', () => {
  it('answers 2xx to deliveries signed with its secret, in X-ACW-Signature or X-ACW-Signature-Next', async () => {
    expect(await waitFor(async () => ((await status('ts-ok')) === 'completed' ? true : undefined), 20_000)).toBe(true);
    expect(await waitFor(async () => ((await status('ts-rotating')) === 'completed' ? true : undefined), 20_000)).toBe(true);
  });
  it('answers 401 to a delivery signed with another secret: the job goes dead', async () => {
    expect(await waitFor(async () => ((await status('ts-wrong')) === 'dead' ? true : undefined), 20_000)).toBe(true);
  });
});

it('the shell one-liner for the base string gives X-ACW-Signature', () => {
  const prefix = saved.get('plain')!;
  const headers = readFileSync(`${prefix}.headers`, 'utf8');
  const ts = /^X-ACW-Timestamp: (\d+)$/m.exec(headers)![1]!;
  const sig = /^X-ACW-Signature: (\S+)$/m.exec(headers)![1]!;
  const out = execFileSync('sh', ['-c', `printf '%s.' "$ts" | cat - "$body" | openssl dgst -sha256 -hmac "$secret"`], {
    env: { ...process.env, ts, body: `${prefix}.body`, secret: SECRET },
    encoding: 'utf8',
  });
  expect(`sha256=${out.trim().replace(/^.*= /, '')}`).toBe(sig);
});
