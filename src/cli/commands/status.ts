import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

const actions = () => import('../actions/status.js');

/**
 * `acw-webhooks status` and `acw-webhooks db url` (docs/operations.md#processes): neither starts
 * the embedded PostgreSQL nor holds it (actions/status.ts).
 */
export function registerStatus(program: Command, run: CliRun): void {
  program
    .command('status')
    .description('print the database and every registered serve and worker process: short lines on a terminal, JSON lines otherwise')
    .option('--json', 'JSON lines even on a terminal (they are the output whenever stdout is not one)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'status'));

  program
    .command('db')
    .description('the database')
    .command('url')
    .description("print the database URL alone (for an application's outbox: notify(db, ...)); it may hold a password")
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'dbUrl'));
}
