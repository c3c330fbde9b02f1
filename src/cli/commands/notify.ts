import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

export function registerNotify(program: Command, run: CliRun): void {
  program
    .command('notify')
    .description('record an event and dispatch it at once (whitelist, webhook jobs, in-app notifications)')
    .argument('<topic>', 'lowercase dot-separated topic, e.g. workspace.sync_failed')
    .option('--data <json>', 'event data: JSON text, @file, or @- for standard input', '{}')
    .option('--recipients <names>', 'comma-separated user names that get an in-app notification')
    .option('--idempotency-key <key>', 'the same key again answers with the first event and writes nothing')
    .option('--ordering-key <key>', 'events with the same key reach each endpoint one at a time, in order (1 to 256 bytes)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, () => import('../actions/notify.js'), 'notify'));
}
