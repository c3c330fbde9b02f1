// The CLI imports its command definitions at start and each command's code only when that command
// runs (src/cli/lazy.ts). This file guards both halves: the help of every command is what it was
// when every command was imported at start (__snapshots__/help.txt, `vitest -u` after a deliberate
// change), and `--help` and `--version` load nothing but commander and those definitions.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { BIN, runCli, runCliInProcess } from '../helpers/cli.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** Every command and group, as the words that name it (the root is []). */
function commandPaths(c: Command = buildProgram(), path: string[] = []): string[][] {
  return [path, ...c.commands.flatMap((sub) => commandPaths(sub, [...path, sub.name()]))];
}

describe('help', () => {
  it('lists every command, group and option as before, for the root and each command (exit 0, stdout only)', async () => {
    const sections: string[] = [];
    for (const path of commandPaths()) {
      const r = await runCliInProcess([...path, '--help'], {});
      expect({ path, code: r.code, stderr: r.stderr }).toEqual({ path, code: 0, stderr: '' });
      sections.push(`$ acw-webhooks ${[...path, '--help'].join(' ')}\n${r.stdout}`);
    }
    // One section per command: a command left out of the program, or one whose definition
    // moved behind its lazy import, is missing here and fails the comparison.
    await expect(sections.join('\n')).toMatchFileSnapshot('./__snapshots__/help.txt');
  });

  it('has every command README.md shows', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    // The commands that run (not the groups), and the words README.md puts after `npx acw-webhooks`.
    const leaves = new Set(
      commandPaths().flatMap((p) =>
        p.length > 0 && !commandPaths().some((q) => q.length > p.length && p.every((w, i) => q[i] === w)) ? [p.join(' ')] : [],
      ),
    );
    const shown = [...readme.matchAll(/^npx acw-webhooks ((?:[a-z][a-z-]* ?)+)/gm)].map((m) => m[1]!.trim().split(' '));
    expect(shown.length).toBeGreaterThan(15);
    // `endpoints show crm`: the command is `endpoints show`, then its arguments.
    const unknown = shown.filter((words) => !words.some((_, i) => leaves.has(words.slice(0, i + 1).join(' '))));
    expect(unknown).toEqual([]);
  });

  it('help, -h and `help <command>` print the same as --help; a group alone prints its help on stderr (exit 2)', async () => {
    const jobs = await runCliInProcess(['jobs', '--help'], {});
    expect(await runCliInProcess(['jobs', '-h'], {})).toEqual(jobs);
    expect(await runCliInProcess(['help', 'jobs'], {})).toEqual(jobs);
    expect(await runCliInProcess(['jobs'], {})).toEqual({ code: 2, stdout: '', stderr: jobs.stdout });
  });
});

describe('the binary', () => {
  it('prints the same help as the program, and the package version for --version, -V, or -V after -c', async () => {
    const env = { PATH: process.env.PATH };
    // `--help` and `-h` alone are answered by bin/ from dist/cli/help.txt (written at build).
    const help = await runCliInProcess(['--help'], env);
    expect(await runCli(['--help'], env)).toEqual(help);
    expect(await runCli(['-h'], env)).toEqual(help);
    // --version alone is answered by bin/ itself; the program answers it anywhere else on the line.
    const version = { code: 0, stdout: `${VERSION}\n`, stderr: '' };
    expect(await runCli(['--version'], env)).toEqual(version);
    expect(await runCliInProcess(['--version'], env)).toEqual(version);
    expect(await runCliInProcess(['-c', 'unused.yaml', '-V'], env)).toEqual(version);
  });
});

describe('what a command line loads', () => {
  let dir: string;
  let register: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'acw-cli-loads-'));
    // A module hook that writes down every file the binary loads (Node runs it on its own thread).
    writeFileSync(
      join(dir, 'hooks.mjs'),
      `import { appendFileSync } from 'node:fs';
       export async function load(url, context, next) {
         if (url.startsWith('file:')) appendFileSync(process.env.ACW_LOADED_FILE, url + '\\n');
         return next(url, context);
       }`,
    );
    register = join(dir, 'register.mjs');
    writeFileSync(
      register,
      `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)});\n`,
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The packages and the files of dist/ that `acw-webhooks ...args` loads. */
  function loaded(args: string[], status = 0): { packages: string[]; dist: string[] } {
    const file = join(dir, `${args.join('_').replace(/[^a-z_-]/gi, '')}.txt`);
    const r = spawnSync(process.execPath, ['--import', register, BIN, ...args], { env: { ...process.env, ACW_LOADED_FILE: file } });
    expect({ args, status: r.status, stderr: r.stderr.toString() }).toMatchObject({ args, status });
    const urls = readFileSync(file, 'utf8').trim().split('\n');
    const packages = new Set(urls.flatMap((u) => u.match(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\//)?.[1] ?? []));
    const dist = urls.filter((u) => !u.includes('/node_modules/')).flatMap((u) => u.match(/\/dist\/(.+)$/)?.[1] ?? []);
    return { packages: [...packages].toSorted(), dist };
  }

  /** What a definition may import: commander, and these files beside the definitions themselves. */
  const DEFINITIONS = new Set(['version.js', 'errors.js', 'admin/alert-actions.js', 'roles.js']);
  const notDefinitions = (dist: string[]) =>
    dist.filter((f) => !DEFINITIONS.has(f) && !/^cli\/(?!actions\/)[^/]+\.js$|^cli\/commands\//.test(f));

  it('a command help: commander and the definitions, no command code (no pg, zod, pino, fastify)', () => {
    for (const args of [['jobs', 'list', '--help'], ['endpoints', 'help', 'replay'], ['help']]) {
      const { packages, dist } = loaded(args);
      expect({ args, packages, other: notDefinitions(dist) }).toEqual({ args, packages: ['commander'], other: [] });
    }
  });

  it('--version, and --help or -h alone (read from dist/cli/help.txt): no module beyond bin/', () => {
    expect(loaded(['--version'])).toEqual({ packages: [], dist: [] });
    expect(loaded(['--help'])).toEqual({ packages: [], dist: [] });
    expect(loaded(['-h'])).toEqual({ packages: [], dist: [] });
  });

  it('verify (a signature that does not match, exit 1): its own code and the signature check, nothing of the database or the config', () => {
    const { packages, dist } = loaded(['verify', '--secret', 's', '--timestamp', '1', '--signature', 'sha256=00', '--body', '{}'], 1);
    expect(packages).toEqual(['commander']);
    expect(notDefinitions(dist).toSorted()).toEqual(['cli/actions/verify.js', 'verify.js']);
  });
});
