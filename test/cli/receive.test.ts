// `acw-webhooks receive` against real deliveries from a running service: 401 and why for a
// signature that fails, --accept-invalid, the headers it got, and --save files that
// `acw-webhooks verify` checks as README.md shows.
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify } from '../../src/outbox.js';
import type { Service } from '../../src/service.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { BIN, startCliInProcess, type CliInProcess } from '../helpers/cli.js';
import { waitFor } from '../helpers/logs.js';
import { startTestService } from '../helpers/service.js';

const run = promisify(execFile);
const SECRET = 'r1ght-s3cret';
const WRONG = 'wr0ng-s3cret';

let dir: string;
let db: TestDatabase;
let strict: CliInProcess;
let lenient: CliInProcess;
let svc: Service;

/** The receivers run in this process: what they print is the subject, not the process (test/cli/supervisor.test.ts signals one). */
async function startReceive(...extra: string[]): Promise<{ proc: CliInProcess; url: string }> {
  // The secret from the environment, as README.md's tour gives it (never on the command line).
  const proc = startCliInProcess(['receive', '--listen', '127.0.0.1:0', ...extra], { ACW_RECEIVE_SECRET: SECRET });
  const line = await proc.waitForLine(/^listening on /);
  return { proc, url: line.replace(/^listening on /, '') };
}

interface Line {
  verified: boolean;
  answered: number;
  path: string;
  reason?: string;
  why?: string;
  missing?: string[];
  headers: Record<string, string>;
  saved?: string;
  id?: string;
}

/** The JSON line receive printed for the delivery to `path`. */
async function lineFor(p: CliInProcess, path: string): Promise<Line> {
  const l = await p.waitForLine(new RegExp(`"path":"${path}"`), 15_000);
  return JSON.parse(l) as Line;
}

/** An endpoint `name` at `<url>/<name>` that gets the topics `<name>.*`. */
const ep = (name: string, url: string, secret: string) => ({ name, url: `${url}/${name}`, secret, topics: [`${name}.*`] });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'acw-receive-'));
  db = await createTestDatabase();
  const a = await startReceive('--save', join(dir, 'deliveries'));
  const b = await startReceive('--accept-invalid');
  strict = a.proc;
  lenient = b.proc;
  ({ svc } = await startTestService(db, {
    jobs: { poll_interval: '100ms' },
    notify: { webhook: { endpoints: [ep('good', a.url, SECRET), ep('bad', a.url, WRONG), ep('lenient', b.url, WRONG)] } },
  }));
});

afterAll(async () => {
  await svc?.stop();
  await Promise.all([strict?.stop(), lenient?.stop()]);
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('receive', () => {
  it('a delivery signed with its secret: 200, the headers it got, and --save files that verify as the README shows', async () => {
    await notify(db.pool, 'good.one', { n: 1 });
    const line = await lineFor(strict, '/good');
    expect(line).toMatchObject({ verified: true, answered: 200 });
    expect(Object.keys(line.headers).toSorted()).toEqual(['X-ACW-Event-Id', 'X-ACW-Signature', 'X-ACW-Timestamp', 'X-ACW-Topic']);
    expect(line.headers['X-ACW-Signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(line.headers['X-ACW-Timestamp']).toMatch(/^\d+$/);
    expect(JSON.stringify(line)).not.toContain(SECRET);
    await waitFor(
      async () => (await db.pool.query(`select 1 from jobs where endpoint = 'good' and status = 'completed'`)).rows.length === 1,
      15_000,
    );

    // README.md "Receiving webhooks": the verify command for a saved delivery, word for word (node BIN for npx acw-webhooks).
    const f = line.saved!;
    expect(readFileSync(`${f}.headers`, 'utf8')).toContain(`X-ACW-Signature: ${line.headers['X-ACW-Signature']}\n`);
    const documented = `node "$0" verify --secret ${SECRET} --body @$f.body \\
  --timestamp "$(sed -n 's/^X-ACW-Timestamp: //p' $f.headers)" \\
  --signature "$(sed -n 's/^X-ACW-Signature: //p' $f.headers)"`;
    const ok = await run('sh', ['-c', `f=$1; ${documented}`, BIN, f]);
    expect(JSON.parse(ok.stdout)).toMatchObject({ valid: true, scheme: 'acw' });
    // The saved body is the raw bytes: one byte more and the same command says so.
    const tampered = await run('sh', ['-c', `f=$1; printf ' ' >> $f.body; ${documented}`, BIN, f]).catch(
      (err: { code: number; stdout: string }) => err,
    );
    expect(tampered).toMatchObject({ code: 1 });
    expect(JSON.parse(tampered.stdout)).toEqual({ valid: false, reason: 'signature_mismatch' });
  });

  it('a delivery signed with another secret: 401 and why, so the job is dead, not completed', async () => {
    await notify(db.pool, 'bad.one', { n: 2 });
    const line = await lineFor(strict, '/bad');
    expect(line).toMatchObject({ verified: false, answered: 401, reason: 'signature_mismatch' });
    expect(line.why).toContain('--secret');
    expect(line.headers['X-ACW-Signature']).toMatch(/^sha256=/);
    expect(JSON.stringify(line)).not.toContain(WRONG);
    expect(JSON.stringify(line)).not.toContain(SECRET);
    const job = await waitFor(
      async () =>
        (await db.pool.query(`select status, last_error from jobs where endpoint = 'bad' and status in ('dead', 'completed')`)).rows[0],
      15_000,
    );
    expect(job.status).toBe('dead');
    expect(job.last_error).toContain('401');
  });

  it('--accept-invalid answers --status as before, still printing why', async () => {
    await notify(db.pool, 'lenient.one', { n: 3 });
    const line = await lineFor(lenient, '/lenient');
    expect(line).toMatchObject({ verified: false, answered: 200, reason: 'signature_mismatch' });
    await waitFor(
      async () => (await db.pool.query(`select 1 from jobs where endpoint = 'lenient' and status = 'completed'`)).rows.length === 1,
      15_000,
    );
  });

  it('reads the secret from --secret-file (two lines during a rotation); --secret still works, with a warning on stderr; none is a usage error', async () => {
    const file = join(dir, 'secrets');
    writeFileSync(file, `${WRONG}\n${SECRET}\n`);
    const fromFile = startCliInProcess(['receive', '--listen', '127.0.0.1:0', '--secret-file', file]);
    const onLine = startCliInProcess(['receive', '--listen', '127.0.0.1:0', '--secret', SECRET]);
    try {
      for (const [p, index] of [
        [fromFile, 1],
        [onLine, undefined],
      ] as const) {
        const url = (await p.waitForLine(/^listening on /)).replace(/^listening on /, '');
        const body = '{"n":1}';
        const ts = Math.floor(Date.now() / 1000);
        const sig = createHmac('sha256', SECRET).update(`${ts}.${body}`).digest('hex');
        const headers = { 'X-ACW-Event-Id': 'e-1', 'X-ACW-Timestamp': String(ts), 'X-ACW-Signature': `sha256=${sig}` };
        expect((await fetch(`${url}/signed`, { method: 'POST', headers, body })).status).toBe(200);
        const got = JSON.parse(await p.waitForLine(/"path":"\/signed"/)) as Line & { secret_index?: number };
        expect([got.verified, got.secret_index]).toEqual([true, index]);
      }
      expect(fromFile.lines.filter((l) => l.startsWith('warning:'))).toEqual([]);
      expect(onLine.lines.filter((l) => l.startsWith('warning:'))).toEqual([
        'warning: --secret shows the secret to every user of this host (ps) and in your shell history; use --secret-file FILE or ACW_RECEIVE_SECRET',
      ]);
      expect(onLine.lines.join('\n')).not.toContain(SECRET);
    } finally {
      await Promise.all([fromFile.stop(), onLine.stop()]);
    }
    const none = startCliInProcess(['receive', '--listen', '127.0.0.1:0']);
    expect(await none.exited).toBe(2);
    expect(none.lines).toContain('no secret: give --secret-file FILE or set ACW_RECEIVE_SECRET (or --secret S)');
  });

  it('names a missing header', async () => {
    const url = (await strict.waitForLine(/^listening on /)).replace(/^listening on /, '');
    const res = await fetch(`${url}/missing`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'X-ACW-Event-Id': '11111111-1111-4111-8111-111111111111',
        'X-ACW-Signature': `sha256=${'0'.repeat(64)}`,
      },
      body: '{}',
    });
    expect(res.status).toBe(401);
    expect(await res.text()).toContain('missing_header');
    const line = await lineFor(strict, '/missing');
    expect(line).toMatchObject({ verified: false, answered: 401, reason: 'missing_header', missing: ['X-ACW-Timestamp'] });
    expect(line.why).toBe('missing header X-ACW-Timestamp');
  });
});
