import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';
import { collect } from '../options.js';

/**
 * A local receiver for development: prints each delivery as a JSON line, whether it verifies and
 * why not, and answers 401 to one that does not (actions/receive.ts).
 */
export function registerReceive(program: Command, run: CliRun): void {
  program
    .command('receive')
    .description('run a local webhook receiver that prints each delivery and whether its signature verifies; 401 when it does not')
    .option('--listen <host:port>', 'where to listen', '127.0.0.1:9000')
    .requiredOption('--secret <secret>', 'the endpoint secret to verify with; repeat it during a rotation (old and new)', collect)
    .option('--status <code>', 'HTTP status to answer a verified delivery with', '200')
    .option('--accept-invalid', 'answer --status to deliveries that do not verify too (still printing why)')
    .option('--save <dir>', 'write each delivery as <dir>/<time>-<id>.body (raw bytes) and .headers (as received), for acw-webhooks verify')
    .option('-c, --config <file>', 'config file (unused; accepted like every command)')
    .action(lazy(run, () => import('../actions/receive.js'), 'receive'));
}
