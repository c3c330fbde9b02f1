import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without type declarations
import { MAX_LINES, oversized } from '../../scripts/check-file-size.mjs';

const root = mkdtempSync(join(tmpdir(), 'acw-size-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const lines = (n: number) => Array.from({ length: n }, (_, i) => `const x${i} = ${i};`).join('\n') + '\n';

describe('the file size check', () => {
  it('names a source file over the limit, and only those, wherever they sit', () => {
    mkdirSync(join(root, 'src/deep/er'), { recursive: true });
    mkdirSync(join(root, 'bench/.cache'), { recursive: true });
    writeFileSync(join(root, 'src/ok.ts'), lines(MAX_LINES));
    writeFileSync(join(root, 'src/deep/er/long.ts'), lines(MAX_LINES + 1));
    writeFileSync(join(root, 'bench/long.mjs'), lines(MAX_LINES + 50));
    writeFileSync(join(root, 'bench/notes.md'), lines(MAX_LINES + 50));
    writeFileSync(join(root, 'bench/.cache/copy.mjs'), lines(MAX_LINES + 50));
    expect(oversized(root, ['src', 'bench'])).toEqual([
      { file: 'bench/long.mjs', lines: MAX_LINES + 50 },
      { file: join('src', 'deep', 'er', 'long.ts'), lines: MAX_LINES + 1 },
    ]);
  });

  it('passes on this repository', () => {
    expect(oversized(join(import.meta.dirname, '../..'), ['src', 'dashboard/src', 'bench'])).toEqual([]);
  });
});
