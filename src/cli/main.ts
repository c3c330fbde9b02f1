import { Command, CommanderError } from 'commander';
import { VERSION } from '../version.js';
import { registerAlerts, registerJobs, registerUsers } from './commands/admin.js';
import { registerConfig } from './commands/config.js';
import { registerEndpointReplay, registerEndpoints } from './commands/endpoints.js';
import { registerMigrate } from './commands/migrate.js';
import { registerNotify } from './commands/notify.js';
import { registerReceive } from './commands/receive.js';
import { registerServe } from './commands/serve.js';
import { registerStatus } from './commands/status.js';
import { registerTopics } from './commands/topics.js';
import { registerVerify } from './commands/verify.js';
import { EXIT, errorLine, exitCodeOf } from './exit.js';
import { guardOutput, processIo, type CliIo } from './io.js';
import type { CliRun } from './lazy.js';

// Only commander and the command definitions are imported here: each command's action, and what
// it needs (config, database, logger, HTTP), is imported when that command runs (lazy.ts).

/** The whole command tree; `ctx` is where its actions read and write (the process's, by default). */
export function buildProgram(ctx: CliRun = { io: processIo(), exitCode: EXIT.ok }): Command {
  const program = new Command('acw-webhooks')
    .description('Signed, reliable webhook delivery on nothing but PostgreSQL')
    .version(VERSION)
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  if (ctx.io !== processIo()) {
    // Set before the subcommands are made, which inherit it. Help is laid out as for a pipe (80
    // columns, no colour): commander would otherwise look at the host process's terminal.
    program.configureOutput({
      writeOut: (s) => void ctx.io.stdout.write(s),
      writeErr: (s) => void ctx.io.stderr.write(s),
      getOutHelpWidth: () => 80,
      getErrHelpWidth: () => 80,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    });
  } else {
    // At most 80 columns on a terminal too, so the root help is the text bin/ prints for `--help`
    // without loading this program (dist/cli/help.txt, written at build by scripts/cli-help.mjs).
    program.configureOutput({
      getOutHelpWidth: () => Math.min(process.stdout.columns || 80, 80),
      getErrHelpWidth: () => Math.min(process.stderr.columns || 80, 80),
    });
  }
  registerServe(program, ctx);
  registerMigrate(program, ctx);
  registerConfig(program, ctx);
  registerNotify(program, ctx);
  registerVerify(program, ctx);
  registerReceive(program, ctx);
  registerJobs(program, ctx);
  registerUsers(program, ctx);
  registerAlerts(program, ctx);
  registerEndpoints(program, ctx);
  registerEndpointReplay(program, ctx);
  registerStatus(program, ctx);
  registerTopics(program, ctx);
  // Subcommands made later inherit exitOverride only if set on each; do it for the whole tree.
  // `-c FILE` is taken anywhere on the line (`acw-webhooks -c f jobs list`, `jobs -c f list`,
  // `jobs list -c f`): each group takes it too, and the command that runs gets the nearest one.
  // Positional: a group reads only the options before its subcommand, so a value such as
  // `--secret -c0ffee` further right stays the subcommand's.
  const walk = (c: Command): void => {
    c.exitOverride();
    if (c.commands.length > 0) c.enablePositionalOptions().option('-c, --config <file>', 'config file (for every subcommand)');
    c.commands.forEach(walk);
  };
  walk(program);
  program.hook('preAction', (_root, cmd) => {
    if (cmd.getOptionValue('config') !== undefined) return;
    for (let c = cmd.parent; c; c = c.parent) {
      const file: unknown = c.getOptionValue('config');
      if (typeof file === 'string') {
        cmd.setOptionValue('config', file);
        return;
      }
    }
  });
  return program;
}

/**
 * Run the CLI with these streams and environment; resolves with the exit code (0 ok, 1 failure,
 * 2 usage or configuration error). Nothing of the process is touched unless `io` is processIo():
 * a test or an application can run commands in its own process.
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const state: CliRun = { io, exitCode: EXIT.ok };
  const program = buildProgram(state);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return state.exitCode;
  } catch (err) {
    // --help and --version end through here with exit code 0.
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    io.stderr.write(errorLine(err));
    return exitCodeOf(err);
  }
}

/** The binary's entry: the process's own streams and environment. */
export async function main(argv: string[]): Promise<number> {
  guardOutput();
  const code = await run(argv, processIo());
  // A stdout that failed other than by being closed sets the process's exit code (io.ts).
  return code === EXIT.ok && typeof process.exitCode === 'number' ? process.exitCode : code;
}
