import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

export function registerConfig(program: Command, run: CliRun): void {
  const config = program.command('config').description('configuration commands');
  config
    .command('check')
    .description('validate the configuration; exit 0 when valid, 2 with every problem named by its key')
    .option('-c, --config <file>', 'config file (default: $ACW_CONFIG, ./config.yaml, built-in defaults)')
    .action(lazy(run, () => import('../actions/config.js'), 'check'));
}
