// `acw-webhooks verify` and `receive` with two secrets during a rotation (docs/operations.md#rotating-a-secret).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHeaders } from '../../src/webhook/sign.js';
import { runCliInProcess, startCliInProcess, type CliResult } from '../helpers/cli.js';

const OLD = 'old-cli-secret-1111';
const NEW = 'new-cli-secret-2222';
const BODY = '{"event_id":"e","topic":"a.b","occurred_at":"2026-01-01T00:00:00.000Z","data":{}}';
const JOB = '0b7e4c1a-3f2d-4b8e-9a6c-5d4e3f2a1b0c';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'acw-rotation-cli-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...args: string[]): Promise<CliResult> {
  return runCliInProcess(args, process.env);
}

const signed = (secret: string, secretNext?: string) =>
  buildHeaders({ scheme: 'acw', secret, secretNext, jobId: JOB, topic: 'a.b', body: BODY, timestamp: Math.floor(Date.now() / 1000) });

describe('verify with two secrets', () => {
  it('accepts an overlap delivery with --secret OLD --secret NEW (either header), and after it with the new one', async () => {
    const file = join(dir, 'body.json');
    writeFileSync(file, BODY);
    const h = signed(OLD, NEW);
    const base = ['verify', '--timestamp', h['X-ACW-Timestamp']!, '--body', `@${file}`];
    const both = await cli(
      ...base,
      '--secret',
      OLD,
      '--secret',
      NEW,
      '--signature',
      h['X-ACW-Signature']!,
      '--signature-next',
      h['X-ACW-Signature-Next']!,
    );
    expect(both.code).toBe(0);
    expect(JSON.parse(both.stdout)).toMatchObject({ valid: true, secret_index: 0 });
    // The new secret alone matches the Next header.
    const next = await cli(...base, '--secret', NEW, '--signature', h['X-ACW-Signature']!, '--signature-next', h['X-ACW-Signature-Next']!);
    expect(next.code).toBe(0);
    const after = signed(NEW);
    const afterBase = ['verify', '--timestamp', after['X-ACW-Timestamp']!, '--body', `@${file}`];
    const late = await cli(...afterBase, '--secret', OLD, '--secret', NEW, '--signature', after['X-ACW-Signature']!);
    expect(JSON.parse(late.stdout)).toMatchObject({ valid: true, secret_index: 1 });
    const wrong = await cli(...afterBase, '--secret', 'a-wrong-one', '--secret', 'another', '--signature', after['X-ACW-Signature']!);
    expect(wrong.code).toBe(1);
    expect(JSON.parse(wrong.stdout)).toEqual({ valid: false, reason: 'signature_mismatch' });
    expect(wrong.stdout + wrong.stderr + both.stdout + both.stderr).not.toMatch(new RegExp(`${OLD}|${NEW}`));
  }, 60_000);

  it('refuses --signature-next for the standard scheme and a missing --secret (exit 2)', async () => {
    const std = await cli(
      'verify',
      '--scheme',
      'standard',
      '--secret',
      'whsec_AAAA',
      '--timestamp',
      '1',
      '--signature',
      'v1,AAAA',
      '--signature-next',
      'x',
      '--body',
      '{}',
    );
    expect(std.code).toBe(2);
    expect(std.stderr).toContain('--signature-next');
    const none = await cli('verify', '--timestamp', '1', '--signature', 'sha256=00', '--body', '{}');
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--secret');
  }, 60_000);
});

describe('receive with two secrets', () => {
  it('verifies deliveries signed during and after the overlap, and says which secret matched', async () => {
    const proc = startCliInProcess(['receive', '--listen', '127.0.0.1:0', '--secret', OLD, '--secret', NEW]);
    try {
      const url = (await proc.waitForLine(/^listening on /)).replace(/^listening on /, '');
      for (const [path, headers] of [
        ['/overlap', signed(OLD, NEW)],
        ['/after', signed(NEW)],
        ['/wrong', signed('a-third-secret')],
      ] as const) {
        const res = await fetch(url + path, { method: 'POST', headers, body: BODY });
        expect(res.status).toBe(path === '/wrong' ? 401 : 200);
      }
      const line = async (path: string) => JSON.parse(await proc.waitForLine(new RegExp(`"path":"${path}"`)));
      expect(await line('/overlap')).toMatchObject({ verified: true, secret_index: 0 });
      expect(Object.keys((await line('/overlap')).headers).map((k) => k.toLowerCase())).toContain('x-acw-signature-next');
      expect(await line('/after')).toMatchObject({ verified: true, secret_index: 1 });
      expect(await line('/wrong')).toMatchObject({ verified: false, reason: 'signature_mismatch' });
      expect(proc.lines.join('\n')).not.toMatch(new RegExp(`${OLD}|${NEW}`));
    } finally {
      expect(await proc.stop()).toBe(0);
    }
  }, 60_000);
});
