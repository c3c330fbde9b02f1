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
    .description(
      'run a local webhook receiver that prints each delivery and whether its signature verifies; 401 when it does not. The secret: --secret-file, or $ACW_RECEIVE_SECRET',
    )
    .option('--listen <host:port>', 'where to listen', '127.0.0.1:9000')
    .option('--secret-file <file>', 'read the endpoint secret from this file (one a line: old and new during a rotation)')
    .option(
      '--secret <secret>',
      'the secret on the command line, where ps shows it (warned about): prefer --secret-file or $ACW_RECEIVE_SECRET; repeatable',
      collect,
    )
    .option('--status <code>', 'HTTP status to answer a verified delivery with', '200')
    .option('--accept-invalid', 'answer --status to deliveries that do not verify too (still printing why)')
    .option('--save <dir>', 'write each delivery as <dir>/<time>-<id>.body (raw bytes) and .headers (as received), for acw-webhooks verify')
    .option('-c, --config <file>', 'config file (unused; accepted like every command)')
    .action(lazy(run, () => import('../actions/receive.js'), 'receive'));
}
