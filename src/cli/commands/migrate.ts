import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

export function registerMigrate(program: Command, run: CliRun): void {
  program
    .command('migrate')
    .description('apply pending migrations once (safe to run concurrently); refuses a database newer than this code')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, () => import('../actions/migrate.js'), 'migrate'));
}
