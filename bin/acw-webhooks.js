#!/usr/bin/env node
import module from 'node:module';

const argv = process.argv.slice(2);

// `--version` alone is answered here, before anything is imported: it is what scripts and
// health checks call, and it needs nothing but package.json. Any other line goes to the CLI,
// which prints the same version for `-V` or `--version` elsewhere on it.
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { readFileSync } = await import('node:fs');
  process.stdout.write(`${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`);
  process.exit(0);
}

// `--help` alone, the same way: the root help that `npm run build` wrote from the program itself
// (scripts/cli-help.mjs), laid out for 80 columns as the program lays it out on any terminal at
// least that wide. A narrower terminal, or a build without the file, goes to the program.
if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h') && !(process.stdout.isTTY && process.stdout.columns < 80)) {
  const { readFileSync } = await import('node:fs');
  let help;
  try {
    help = readFileSync(new URL('../dist/cli/help.txt', import.meta.url), 'utf8');
  } catch {
    // Not built with it: the program prints the same text below.
  }
  if (help !== undefined) {
    process.stdout.write(help);
    process.exit(0);
  }
}

// On Node 22 and later, V8 keeps the compiled code of our modules and our dependencies' on disk
// (in the OS temp directory), so every command after the first starts faster. Node 20 has no
// such cache: this is then a no-op. Set before the CLI is imported, which the import below waits for.
module.enableCompileCache?.();
// main.js imports commander and the command definitions only; a command's code (and the config,
// database and HTTP modules it needs) is imported when that command runs (src/cli/lazy.ts).
const { main } = await import('../dist/cli/main.js');

const code = await main(argv);
// Long-running commands (serve, worker, receive) resolve only after their shutdown.
process.exit(code);
