// Property-based fuzzing of the CLI (issue 18): generated command lines, run in this process
// (main() takes the argv and returns the exit code; stdout and stderr are captured) and, for 100 of
// them, through the real binary. Exit 0, 1 or 2 only, never a crash or a stack trace, never a hang;
// a usage error (2) says what was wrong on stderr and changes no table; a line carrying a mistake
// (an option value tagged with the rule it breaks) never exits 0.
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
/** Spawned binaries: the in-process cases cover the breadth; these check what only a process shows. */
const SPAWNED = Number(process.env['FUZZ_SPAWNED'] ?? 30);
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

/**
 * Options with plausible values, or with a mistake naming the rule it breaks (the flag alone for
 * switches). A command line whose last value of a flag breaks a rule must not exit 0.
 */
const OPTIONS: ReadonlyArray<{ argv: string[]; breaks?: string }> = [
  { argv: ['--status', 'dead'] },
  { argv: ['--status', 'DEAD'], breaks: 'not a status (lowercase)' },
  { argv: ['--limit', '10'] },
  { argv: ['--limit', 'x'], breaks: 'not a number' },
  { argv: ['--limit', '0'], breaks: 'under 1' },
  { argv: ['--limit', '99999999999999999999'], breaks: 'over the maximum' },
  { argv: ['--type', 'webhook.deliver'] },
  { argv: ['--topic', 'a.b'] },
  { argv: ['--topic', 'A B'], breaks: 'not a topic' },
  { argv: ['--endpoint', 'default'] },
  { argv: ['--event-id', 'not-a-uuid'], breaks: 'not a UUID' },
  { argv: ['--since', '1h'] },
  { argv: ['--since', '-5'], breaks: 'not a time or duration' },
  { argv: ['--until', '1m'] },
  { argv: ['--data', '{}'] },
  { argv: ['--data', '{"a":'], breaks: 'malformed JSON' },
  { argv: ['--data', '"\\u0000"'], breaks: 'a NUL character' },
  { argv: ['--data', '@nonexistent-file'], breaks: 'no such file' },
  { argv: ['--recipients', 'ops'] },
  // Empty names between the commas: left out, or refused.
  { argv: ['--recipients', ',,'] },
  { argv: ['--idempotency-key', 'k1'] },
  { argv: ['--idempotency-key', ''], breaks: 'empty' },
  { argv: ['--role', 'admin'] },
  { argv: ['--role', 'god'], breaks: 'not a role' },
  { argv: ['--url', 'http://127.0.0.1:9/x'] },
  { argv: ['--url', 'ftp://x'], breaks: 'not http or https' },
  { argv: ['--topics', '*'] },
  { argv: ['--topics', ''] },
  { argv: ['--scheme', 'standard'] },
  { argv: ['--scheme', 'nope'], breaks: 'not a scheme' },
  { argv: ['--header', 'X-A=1'] },
  { argv: ['--header', 'bad'], breaks: 'not NAME=VALUE' },
  { argv: ['--timeout', '1s'] },
  { argv: ['--timeout', '0'], breaks: 'under 100ms' },
  { argv: ['--max-in-flight', '0'], breaks: 'under 1' },
  { argv: ['--rate-limit', '20/s'] },
  { argv: ['--rate-limit', 'fast'], breaks: 'not a rate' },
  { argv: ['--secret', 'a-secret-of-16-chars'] },
  { argv: ['--secret', 'x'], breaks: 'under 16 characters' },
  { argv: ['--overlap', '1h'] },
  { argv: ['--overlap', '999999h'], breaks: 'over 720h' },
  { argv: ['--window-minutes', '0'], breaks: 'under 1' },
  { argv: ['--timestamp', '1'] },
  { argv: ['--signature', 'sha256=00'] },
  { argv: ['--signature-next', 'x'] },
  { argv: ['--body', 'x'] },
  { argv: ['--id', 'i'] },
  { argv: ['--tolerance', '-1'], breaks: 'negative' },
  { argv: ['--description', 'd'] },
  { argv: ['--force'] },
  { argv: ['--dry-run'] },
  { argv: ['--disabled'] },
  { argv: ['--enabled'] },
  { argv: ['--unknown-flag'], breaks: 'an unknown option' },
  // A command that reads no config file may succeed without one.
  { argv: ['-c', '/nonexistent/config.yaml'] },
  { argv: ['--'] },
  { argv: ['-'] },
];
const POSITIONAL = ['ops', 'nope', 'default', 'a.b', '00000000-0000-0000-0000-000000000000', 'JOB'];
/** Junk words: unknown options (each a mistake), a flag=value form that sets its flag, and odd words. */
const JUNK: ReadonlyArray<{ argv: string[]; breaks?: string }> = [
  { argv: ['--x'], breaks: 'an unknown option' },
  { argv: ['-z'], breaks: 'an unknown option' },
  { argv: ['--data='] },
  { argv: ['--limit=5'] },
  { argv: ['extra'] },
];

/** Never generated: commands that run until stopped, or read standard input. */
const blocking = (argv: string[]): boolean =>
  argv.some((a) => ['serve', 'worker', 'receive', '--follow'].includes(a) || a.startsWith('@-') || a.includes('@-'));

/** The long options and the number of arguments each command takes (from the program itself), so most lines get past the parser. */
function shapeOf(cmd: string[]): { options: ReadonlyArray<{ argv: string[]; breaks?: string }>; args: number } {
  let c = buildProgram();
  for (const word of cmd) {
    const sub = c.commands.find((x) => x.name() === word);
    if (!sub) return { options: [], args: 0 };
    c = sub;
  }
  const flags = new Set(c.options.map((o) => o.long));
  return { options: OPTIONS.filter(({ argv: [flag] }) => flags.has(flag)), args: c.registeredArguments.length };
}

/** Repeatable options (all values kept): a mistake in any of them counts. Any other flag keeps its last value. */
const REPEATABLE = new Set(['--header']);

/**
 * The rules a command line breaks: its words up to `--` (after it, everything is an argument), each
 * flag's last value (or every value of a repeatable one). Null: not judged (help and version exit 0 first).
 */
function brokenRules(groups: ReadonlyArray<{ argv: string[]; breaks?: string }>, cmd: string[]): string[] | null {
  if (cmd.some((w) => w === '--help' || w === '--version')) return null;
  const last = new Map<string, string | undefined>();
  const always: string[] = [];
  for (const g of groups) {
    const [word = ''] = g.argv;
    if (word === '--') break;
    if (!word.startsWith('-') || word === '-') continue;
    const flag = word.split('=')[0]!;
    if (REPEATABLE.has(flag) || flag === '--x' || flag === '-z' || flag === '--unknown-flag') {
      if (g.breaks) always.push(`${word}: ${g.breaks}`);
    } else last.set(flag, g.breaks === undefined ? undefined : `${g.argv.join(' ')}: ${g.breaks}`);
  }
  return [...always, ...[...last.values()].filter((r) => r !== undefined)];
}

interface Line {
  argv: string[];
  /** Rules its options break (null: not judged). */
  broken: string[] | null;
}

const lineArb: fc.Arbitrary<Line> = fc
  .constantFrom(...COMMANDS)
  .chain((cmd) => {
    const { options: own, args } = shapeOf(cmd);
    // Mostly the command's own options and its number of arguments; now and then what it does not take.
    const foreign = fc.constantFrom(...OPTIONS);
    const option = own.length > 0 ? fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...own) }, foreign) : foreign;
    const options = fc.oneof(
      { weight: own.length > 0 ? 1 : 6, arbitrary: fc.constant<Array<{ argv: string[]; breaks?: string }>>([]) },
      fc.array(option, { minLength: 1, maxLength: own.length > 0 ? 4 : 1 }),
    );
    const positional = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...POSITIONAL) }, oddString).map((p) => ({ argv: [p] }));
    const positionals = fc.oneof(
      { weight: 8, arbitrary: fc.array(positional, { minLength: args, maxLength: args }) },
      fc.array(positional, { maxLength: 3 }),
    );
    const junk = fc.oneof(
      { weight: 8, arbitrary: fc.constant<Array<{ argv: string[]; breaks?: string }>>([]) },
      fc.array(
        fc.oneof(
          oddString.map((w) => ({ argv: [w] })),
          fc.constantFrom(...JUNK),
        ),
        { minLength: 1, maxLength: 2 },
      ),
    );
    return fc.tuple(fc.constant(cmd), options, positionals, junk, fc.nat());
  })
  .map(([cmd, opts, pos, junk, seed]) => {
    const rest = [...opts, ...pos, ...junk];
    // A deterministic shuffle (from the generated seed) of whole options: before and after positionals.
    for (let i = rest.length - 1; i > 0; i--) {
      const j = (seed + i * 7919) % (i + 1);
      [rest[i], rest[j]] = [rest[j]!, rest[i]!];
    }
    const argv = [...cmd, ...rest.flatMap((g) => g.argv)].map((a) => (a === 'JOB' ? jobId : a));
    return { argv, broken: brokenRules(rest, cmd) };
  })
  .filter((l) => !blocking(l.argv));

/** Why this outcome breaks a property, or null. */
function violation(o: Outcome): string | null {
  if (![0, 1, 2].includes(o.code)) return `exit ${o.code}`;
  if (/\n\s+at .+:\d+:\d+/.test(o.stderr)) return 'a stack trace on stderr';
  if (/TypeError|ReferenceError|RangeError|Cannot read propert|is not a function|undefined is not/.test(o.stderr))
    return 'a crash on stderr';
  if (o.code !== 0 && o.stderr.trim() === '') return `exit ${o.code} with nothing on stderr`;
  return null;
}

/** Exit 0 for a command line carrying a mistake: the check for it is gone. */
const acceptedBad = (l: Line, o: Outcome): string | null =>
  o.code === 0 && l.broken !== null && l.broken.length > 0 ? `exit 0 for an option that breaks: ${l.broken.join('; ')}` : null;

const inProcess = (argv: string[]): Promise<Outcome> => runCliInProcess(argv, { ACW_CONFIG: config }, HANG_MS);

/**
 * A spawned command line is hung when it runs ten times as long as a plain one (`users list`:
 * start, config, a query) takes on this machine at that moment, and HANG_MS at least. A fixed
 * bound alone failed on a loaded machine, where every process start took 8 s.
 */
const HANG_FACTOR = 10;
/** The reference's own bound: far beyond any start-up, loaded or not. */
const REFERENCE_HANG_MS = 120_000;

async function hangBound(): Promise<number> {
  const started = performance.now();
  const o = await spawned(['users', 'list'], REFERENCE_HANG_MS);
  if (o.code !== 0) throw new Error(`the reference command failed\n${show(['users', 'list'], o)}`);
  return Math.max(HANG_MS, Math.ceil(HANG_FACTOR * (performance.now() - started)));
}

function spawned(argv: string[], hangMs: number): Promise<Outcome> {
  const { DATABASE_URL: _unset, ...env } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      // A process's arguments cannot hold NUL (in process they can, and are tried there).
      [BIN, ...argv.map((a) => a.replaceAll('\u0000', ''))],
      { env: { ...env, ACW_CONFIG: config }, timeout: hangMs, killSignal: 'SIGKILL', cwd: dir },
      (error, stdout, stderr) => {
        const e = error as (Error & { code?: unknown; signal?: unknown; killed?: boolean }) | null;
        const code = e === null ? 0 : typeof e.code === 'number' ? e.code : -1;
        resolve({ code: e?.killed ? -2 : code, stdout, stderr: e?.killed ? `killed after ${hangMs} ms\n${stderr}` : stderr });
      },
    );
  });
}

const show = (argv: string[], o: Outcome): string =>
  `argv: ${JSON.stringify(argv)}\nexit ${o.code}\nstderr: ${o.stderr.slice(0, 800)}\nstdout: ${o.stdout.slice(0, 300)}`;

describe(`fuzzing the CLI (seed ${SEED})`, () => {
  it('in process: exit 0, 1 or 2, never a crash or hang; a usage error says why and changes no table', { timeout: 600_000 }, async () => {
    const codes: Record<number, number> = {};
    let judged = 0;
    for (const line of cases('cli', lineArb, IN_PROCESS)) {
      const { argv } = line;
      const before = await rowCounts(db.pool);
      const o = await inProcess(argv);
      codes[o.code] = (codes[o.code] ?? 0) + 1;
      if (line.broken?.length) judged++;
      if (process.env['FUZZ_SHOW']) console.log(o.code, JSON.stringify(argv), line.broken, o.stderr.split('\n')[0]);
      const why = violation(o) ?? acceptedBad(line, o);
      if (why) throw new Error(`${why}\n${show(argv, o)}`);
      const after = o.code === 2 ? await rowCounts(db.pool) : before;
      if (JSON.stringify(after) !== JSON.stringify(before)) throw new Error(`a usage error changed a table\n${show(argv, o)}`);
    }
    console.log(`fuzz cli in process: exit codes ${JSON.stringify(codes)}, ${judged} carrying a mistake`);
    expect(Object.values(codes).reduce((a, b) => a + b, 0)).toBe(IN_PROCESS);
  });

  it(`the binary: ${SPAWNED} command lines, the same properties`, { timeout: 600_000 }, async () => {
    // npm test builds first; run `npm run build` before this file alone.
    expect(existsSync(fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))), 'dist/ is built').toBe(true);
    const all = cases('cli-binary', lineArb, SPAWNED);
    const codes: Record<number, number> = {};
    // Two at a time: each is a Node process starting up, on two cores. The hang bound follows the
    // machine's pace, measured again every 20 lines.
    let hangMs = HANG_MS;
    for (let i = 0; i < all.length; i += 2) {
      if (i % 20 === 0) hangMs = await hangBound();
      const outcomes = await Promise.all(all.slice(i, i + 2).map(async (line) => ({ line, o: await spawned(line.argv, hangMs) })));
      for (const { line, o } of outcomes) {
        codes[o.code] = (codes[o.code] ?? 0) + 1;
        const why = violation(o) ?? acceptedBad(line, o);
        if (why) throw new Error(`${why}\n${show(line.argv, o)}`);
      }
    }
    console.log(`fuzz cli binary: exit codes ${JSON.stringify(codes)}`);
    expect(Object.values(codes).reduce((a, b) => a + b, 0)).toBe(SPAWNED);
  });
});
