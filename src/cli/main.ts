import { Command, CommanderError } from 'commander';
import { UsageError } from '../errors.js';
import { VERSION } from '../version.js';
import { registerAlerts, registerJobs, registerUsers } from './commands/admin.js';
import { registerConfig } from './commands/config.js';
import { registerEndpointReplay, registerEndpoints } from './commands/endpoints.js';
import { registerMigrate } from './commands/migrate.js';
import { registerNotify } from './commands/notify.js';
import { registerReceive } from './commands/receive.js';
import { registerServe } from './commands/serve.js';
import { registerStatus } from './commands/status.js';
import { registerVerify } from './commands/verify.js';
import { ApiError } from '../errors.js';
import { EXIT, ExitError, exitCodeOf } from './context.js';
import { guardOutput } from './output.js';

export function buildProgram(): Command {
  const program = new Command('acw-webhooks')
    .description('Signed, reliable webhook delivery on nothing but PostgreSQL')
    .version(VERSION)
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  registerServe(program);
  registerMigrate(program);
  registerConfig(program);
  registerNotify(program);
  registerVerify(program);
  registerReceive(program);
  registerJobs(program);
  registerUsers(program);
  registerAlerts(program);
  registerEndpoints(program);
  registerEndpointReplay(program);
  registerStatus(program);
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
  program.hook('preAction', (_root, run) => {
    if (run.getOptionValue('config') !== undefined) return;
    for (let c = run.parent; c; c = c.parent) {
      const file: unknown = c.getOptionValue('config');
      if (typeof file === 'string') {
        run.setOptionValue('config', file);
        return;
      }
    }
  });
  return program;
}

/** Run the CLI; resolves with the exit code (0 ok, 1 failure, 2 usage or configuration error). */
export async function main(argv: string[]): Promise<number> {
  guardOutput();
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end through here with exit code 0.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    // A refusal says what was wrong in its own words; anything else is an error we did not expect.
    const known = err instanceof ExitError || err instanceof UsageError || err instanceof ApiError;
    process.stderr.write(known ? `${err.message}\n` : `error: ${(err as Error).message ?? String(err)}\n`);
    return exitCodeOf(err);
  }
}
