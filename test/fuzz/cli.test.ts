// Property-based fuzzing of the CLI (issue 18): generated command lines, run in this process
// (main() takes the argv and returns the exit code; stdout and stderr are captured) and, for 100 of
// them, through the real binary. Exit 0, 1 or 2 only, never a crash or a stack trace, never a hang;
// a usage error (2) says what was wrong on stderr and changes no table.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { insertJob, makeUser, rowCounts } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { runCliInProcess, type Outcome } from './cli-in-process.js';
import { cases, oddString, RUNS, SEED } from './arbitraries.js';

const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));
/** In-process cases: each opens and closes a database pool, so fewer than the HTTP targets. */
const IN_PROCESS = Math.ceil(RUNS / 8);
const SPAWNED = Number(process.env['FUZZ_SPAWNED'] ?? 100);
const HANG_MS = 10_000;

let db: TestDatabase;
let dir: string;
let config: string;
let jobId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-fuzz-cli-'));
  config = join(dir, 'config.yaml');
  // No encryption key: `endpoints add` and the like fail (exit 1) naming it; the rest runs against the test database.
  writeFileSync(config, `database:\n  url: ${db.url}\n  migrate: false\njobs:\n  enabled: false\nlog:\n  level: warn\n`);
  writeFileSync(join(dir, 'body.txt'), '{"a":1}');
  await makeUser(db.pool, 'ops', 'admin');
  jobId = await insertJob(db.pool, { status: 'dead' });
  console.log(`fuzz cli: seed ${SEED}, ${IN_PROCESS} command lines in process, ${SPAWNED} through the binary`);
});
afterAll(async () => {
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const COMMANDS = [
  ['jobs', 'list'],
  ['jobs', 'show'],
  ['jobs', 'retry'],
  ['jobs', 'cancel'],
  ['jobs', 'redrive'],
  ['users', 'add'],
  ['users', 'list'],
  ['users', 'revoke'],
  ['alerts'],
  ['config', 'check'],
  ['endpoints', 'list'],
  ['endpoints', 'show'],
  ['endpoints', 'pause'],
  ['endpoints', 'resume'],
  ['endpoints', 'add'],
  ['endpoints', 'update'],
  ['endpoints', 'rotate-secret'],
  ['endpoints', 'remove'],
  ['endpoints', 'replay'],
  ['notify'],
  ['verify'],
  ['migrate'],
  [],
  ['jobs'],
  ['endpoints'],
  ['nope'],
  ['--help'],
  ['--version'],
];

/** Options with plausible or wrong values (the flag alone for switches). */
const OPTIONS: string[][] = [
  ['--status', 'dead'],
  ['--status', 'DEAD'],
  ['--limit', '10'],
  ['--limit', 'x'],
  ['--limit', '0'],
  ['--limit', '99999999999999999999'],
  ['--type', 'webhook.deliver'],
  ['--topic', 'a.b'],
  ['--topic', 'A B'],
  ['--endpoint', 'default'],
  ['--event-id', 'not-a-uuid'],
  ['--since', '1h'],
  ['--since', '-5'],
  ['--until', '1m'],
  ['--data', '{}'],
  ['--data', '{"a":'],
  ['--data', '"\\u0000"'],
  ['--data', '@nonexistent-file'],
  ['--recipients', 'ops'],
  ['--recipients', ',,'],
  ['--idempotency-key', 'k1'],
  ['--idempotency-key', ''],
  ['--role', 'admin'],
  ['--role', 'god'],
  ['--url', 'http://127.0.0.1:9/x'],
  ['--url', 'ftp://x'],
  ['--topics', '*'],
  ['--topics', ''],
  ['--scheme', 'standard'],
  ['--scheme', 'nope'],
  ['--header', 'X-A=1'],
  ['--header', 'bad'],
  ['--timeout', '1s'],
  ['--timeout', '0'],
  ['--max-in-flight', '0'],
  ['--rate-limit', '20/s'],
  ['--rate-limit', 'fast'],
  ['--secret', 'a-secret-of-16-chars'],
  ['--secret', 'x'],
  ['--overlap', '1h'],
  ['--overlap', '999999h'],
  ['--window-minutes', '0'],
  ['--timestamp', '1'],
  ['--signature', 'sha256=00'],
  ['--signature-next', 'x'],
  ['--body', 'x'],
  ['--id', 'i'],
  ['--tolerance', '-1'],
  ['--description', 'd'],
  ['--force'],
  ['--dry-run'],
  ['--disabled'],
  ['--enabled'],
  ['--unknown-flag'],
  ['-c', '/nonexistent/config.yaml'],
  ['--'],
  ['-'],
];
const POSITIONAL = ['ops', 'nope', 'default', 'a.b', '00000000-0000-0000-0000-000000000000', 'JOB'];

/** Never generated: commands that run until stopped, or read standard input. */
const blocking = (argv: string[]): boolean =>
  argv.some((a) => ['serve', 'worker', 'receive', '--follow'].includes(a) || a.startsWith('@-') || a.includes('@-'));

/** The long options and the number of arguments each command takes (from the program itself), so most lines get past the parser. */
function shapeOf(cmd: string[]): { options: string[][]; args: number } {
  let c = buildProgram();
  for (const word of cmd) {
    const sub = c.commands.find((x) => x.name() === word);
    if (!sub) return { options: [], args: 0 };
    c = sub;
  }
  const flags = new Set(c.options.map((o) => o.long));
  return { options: OPTIONS.filter(([flag]) => flags.has(flag)), args: c.registeredArguments.length };
}

const argvArb: fc.Arbitrary<string[]> = fc
  .constantFrom(...COMMANDS)
  .chain((cmd) => {
    const { options: own, args } = shapeOf(cmd);
    // Mostly the command's own options and its number of arguments; now and then what it does not take.
    const foreign = fc.constantFrom(...OPTIONS);
    const option = own.length > 0 ? fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...own) }, foreign) : foreign;
    const options = fc.oneof(
      { weight: own.length > 0 ? 1 : 6, arbitrary: fc.constant<string[][]>([]) },
      fc.array(option, { minLength: 1, maxLength: own.length > 0 ? 4 : 1 }),
    );
    const positional = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...POSITIONAL) }, oddString);
    const positionals = fc.oneof(
      { weight: 8, arbitrary: fc.array(positional, { minLength: args, maxLength: args }) },
      fc.array(positional, { maxLength: 3 }),
    );
    const junk = fc.oneof(
      { weight: 8, arbitrary: fc.constant<string[]>([]) },
      fc.array(fc.oneof(oddString, fc.constantFrom('--x', '-z', '--data=', '--limit=5', 'extra')), { minLength: 1, maxLength: 2 }),
    );
    return fc.tuple(fc.constant(cmd), options, positionals, junk, fc.nat());
  })
  .map(([cmd, opts, pos, junk, seed]) => {
    const rest: string[][] = [...opts, ...pos.map((p) => [p]), ...junk.map((j) => [j])];
    // A deterministic shuffle (from the generated seed) of whole options: before and after positionals.
    for (let i = rest.length - 1; i > 0; i--) {
      const j = (seed + i * 7919) % (i + 1);
      [rest[i], rest[j]] = [rest[j]!, rest[i]!];
    }
    return [...cmd, ...rest.flat()].map((a) => (a === 'JOB' ? jobId : a));
  })
  .filter((argv) => !blocking(argv));

/** Why this outcome breaks a property, or null. */
function violation(o: Outcome): string | null {
  if (![0, 1, 2].includes(o.code)) return `exit ${o.code}`;
  if (/\n\s+at .+:\d+:\d+/.test(o.stderr)) return 'a stack trace on stderr';
  if (/TypeError|ReferenceError|RangeError|Cannot read propert|is not a function|undefined is not/.test(o.stderr))
    return 'a crash on stderr';
  if (o.code !== 0 && o.stderr.trim() === '') return `exit ${o.code} with nothing on stderr`;
  return null;
}

const inProcess = (argv: string[]): Promise<Outcome> => runCliInProcess(argv, { ACW_CONFIG: config }, HANG_MS);

function spawned(argv: string[]): Promise<Outcome> {
  const { DATABASE_URL: _unset, ...env } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      // A process's arguments cannot hold NUL (in process they can, and are tried there).
      [BIN, ...argv.map((a) => a.replaceAll('\u0000', ''))],
      { env: { ...env, ACW_CONFIG: config }, timeout: HANG_MS, killSignal: 'SIGKILL', cwd: dir },
      (error, stdout, stderr) => {
        const e = error as (Error & { code?: unknown; signal?: unknown; killed?: boolean }) | null;
        const code = e === null ? 0 : typeof e.code === 'number' ? e.code : -1;
        resolve({ code: e?.killed ? -2 : code, stdout, stderr: e?.killed ? `killed after ${HANG_MS} ms\n${stderr}` : stderr });
      },
    );
  });
}

const show = (argv: string[], o: Outcome): string =>
  `argv: ${JSON.stringify(argv)}\nexit ${o.code}\nstderr: ${o.stderr.slice(0, 800)}\nstdout: ${o.stdout.slice(0, 300)}`;

describe(`fuzzing the CLI (seed ${SEED})`, () => {
  it('in process: exit 0, 1 or 2, never a crash or hang; a usage error says why and changes no table', { timeout: 600_000 }, async () => {
    const codes: Record<number, number> = {};
    for (const argv of cases('cli', argvArb, IN_PROCESS)) {
      const before = await rowCounts(db.pool);
      const o = await inProcess(argv);
      codes[o.code] = (codes[o.code] ?? 0) + 1;
      if (process.env['FUZZ_SHOW']) console.log(o.code, JSON.stringify(argv), o.stderr.split('\n')[0]);
      const why = violation(o);
      if (why) throw new Error(`${why}\n${show(argv, o)}`);
      const after = o.code === 2 ? await rowCounts(db.pool) : before;
      if (JSON.stringify(after) !== JSON.stringify(before)) throw new Error(`a usage error changed a table\n${show(argv, o)}`);
    }
    console.log(`fuzz cli in process: exit codes ${JSON.stringify(codes)}`);
    expect(Object.values(codes).reduce((a, b) => a + b, 0)).toBe(IN_PROCESS);
  });

  it(`the binary: ${SPAWNED} command lines, the same properties`, { timeout: 600_000 }, async () => {
    // npm test builds first; run `npm run build` before this file alone.
    expect(existsSync(fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))), 'dist/ is built').toBe(true);
    const all = cases('cli-binary', argvArb, SPAWNED);
    const codes: Record<number, number> = {};
    // Two at a time: each is a Node process starting up, on two cores.
    for (let i = 0; i < all.length; i += 2) {
      const outcomes = await Promise.all(all.slice(i, i + 2).map(async (argv) => ({ argv, o: await spawned(argv) })));
      for (const { argv, o } of outcomes) {
        codes[o.code] = (codes[o.code] ?? 0) + 1;
        const why = violation(o);
        if (why) throw new Error(`${why}\n${show(argv, o)}`);
      }
    }
    console.log(`fuzz cli binary: exit codes ${JSON.stringify(codes)}`);
    expect(Object.values(codes).reduce((a, b) => a + b, 0)).toBe(SPAWNED);
  });
});
