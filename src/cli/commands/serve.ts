import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

const actions = () => import('../actions/serve.js');

/**
 * `serve` (API + dispatcher + workers + runners) and `worker` (the same without the API; only
 * /healthz /readyz /metrics). Both run until SIGINT/SIGTERM or until the process that started
 * them exits (see stop.ts), then shut down gracefully and exit 0.
 */
export function registerServe(program: Command, run: CliRun): void {
  program
    .command('serve')
    .description('run the HTTP API, event dispatcher, delivery workers and periodic runners')
    .option('-c, --config <file>', 'config file')
    .option('--listen <host:port>', 'override server.listen')
    .action(lazy(run, actions, 'serve'));
  program
    .command('worker')
    .description('run the event dispatcher, delivery workers and periodic runners, with /healthz /readyz /metrics')
    .option('-c, --config <file>', 'config file')
    .option('--listen <host:port>', 'override server.listen')
    .action(lazy(run, actions, 'worker'));
}
