#!/usr/bin/env node
// Part of `npm run build`: writes the root help (`acw-webhooks --help`) to dist/cli/help.txt, which
// bin/acw-webhooks.js prints without importing commander or the command definitions, so the most
// common first command starts as fast as `--version`. The text is the program's own, laid out for
// 80 columns as the program lays it out (src/cli/main.ts); test/cli/help.test.ts compares the two.
import { writeFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';

const { run } = await import('../dist/cli/main.js');
let out = '';
let err = '';
const stdout = new PassThrough().on('data', (b) => (out += b));
const stderr = new PassThrough().on('data', (b) => (err += b));
const code = await run(['--help'], { stdout, stderr, stdin: [], env: {}, stdoutClosed: new AbortController().signal });
if (code !== 0 || err !== '' || out === '') {
  console.error(`cli-help: \`--help\` exited ${code}${err ? `: ${err}` : ''}`);
  process.exit(1);
}
writeFileSync(new URL('../dist/cli/help.txt', import.meta.url), out);
