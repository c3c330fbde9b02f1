// The list of files CI runs on its second Node version (vitest.runtime.config.ts): a file renamed
// or removed would otherwise drop out of that run without a word (vitest runs what matches).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import runtimeConfig, { RUNTIME_SURFACE } from '../../vitest.runtime.config.js';

const ROOT = join(import.meta.dirname, '../..');
const files = Object.values(RUNTIME_SURFACE).flat();

describe('the runtime surface list', () => {
  it('names test files that exist, each once, all of them in the first run too (test/**/*.test.ts)', () => {
    expect(files.filter((f) => !existsSync(join(ROOT, f)))).toEqual([]);
    expect(files.filter((f) => !/^test\/.+\.test\.ts$/.test(f))).toEqual([]);
    expect(new Set(files).size).toBe(files.length);
  });

  it('is what the runtime config includes, and what .ci/run runs on its second Node version', () => {
    expect(runtimeConfig.test?.include).toEqual(files);
    const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
    const lastRun = ci.slice(ci.lastIndexOf('export PATH="$tools/node24/bin:$PATH"'));
    expect(lastRun).toMatch(/npx vitest run -c vitest\.runtime\.config\.ts\s*$/);
  });

  it('is the list CONTRIBUTING.md gives, file for file', () => {
    const doc = readFileSync(join(ROOT, 'CONTRIBUTING.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## What CI runs'), doc.indexOf('\n## ', doc.indexOf('## What CI runs') + 1));
    const listed = [...section.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((m) => m[1]);
    expect(listed.toSorted()).toEqual(files.toSorted());
  });
});
