import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';
import { collect } from '../options.js';

export function registerVerify(program: Command, run: CliRun): void {
  program
    .command('verify')
    .description('check a delivery signature as a receiver would; exit 0 when valid, 1 when not')
    .requiredOption(
      '--secret <secret>',
      'the endpoint secret (whsec_... for scheme standard); repeat it during a rotation (old and new): any that matches verifies',
      collect,
    )
    .requiredOption('--timestamp <ts>', 'the X-ACW-Timestamp (or webhook-timestamp) header')
    .requiredOption('--signature <sig>', 'the X-ACW-Signature (or webhook-signature) header')
    .option('--signature-next <sig>', 'the X-ACW-Signature-Next header, sent during a rotation (acw scheme)')
    .requiredOption('--body <body>', 'the exact body: text, @file, or @- for standard input')
    .option('--id <id>', 'the X-ACW-Event-Id / webhook-id header')
    .option('--scheme <scheme>', 'acw or standard', 'acw')
    .option('--tolerance <seconds>', 'accepted clock skew in seconds', '300')
    .option('-c, --config <file>', 'config file (unused; accepted like every command)')
    .action(lazy(run, () => import('../actions/verify.js'), 'verify'));
}
