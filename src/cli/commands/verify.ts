import type { Command } from 'commander';
import { verifyWebhookDetailed } from '../../verify.js';
import { EXIT, ExitError, printJson, readArg } from '../context.js';

interface VerifyOptions {
  secret: string;
  timestamp: string;
  signature: string;
  body: string;
  id?: string;
  scheme?: string;
  tolerance: string;
}

export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('check a delivery signature as a receiver would; exit 0 when valid, 1 when not')
    .requiredOption('--secret <secret>', 'the endpoint secret (whsec_... for scheme standard)')
    .requiredOption('--timestamp <ts>', 'the X-ACW-Timestamp (or webhook-timestamp) header')
    .requiredOption('--signature <sig>', 'the X-ACW-Signature (or webhook-signature) header')
    .requiredOption('--body <body>', 'the exact body: text, @file, or @- for standard input')
    .option('--id <id>', 'the X-ACW-Event-Id / webhook-id header')
    .option('--scheme <scheme>', 'acw or standard', 'acw')
    .option('--tolerance <seconds>', 'accepted clock skew in seconds', '300')
    .option('-c, --config <file>', 'config file (unused; accepted like every command)')
    .action(async (o: VerifyOptions) => {
      const tolerance = Number(o.tolerance);
      if (!Number.isFinite(tolerance) || tolerance < 0)
        throw new ExitError(EXIT.usage, `--tolerance: expected seconds, got ${JSON.stringify(o.tolerance)}`);
      if (o.scheme !== 'acw' && o.scheme !== 'standard')
        throw new ExitError(EXIT.usage, `--scheme: expected acw or standard, got ${JSON.stringify(o.scheme)}`);
      const body = await readArg(o.body);
      const id = o.id ?? '00000000-0000-0000-0000-000000000000';
      const headers =
        o.scheme === 'standard'
          ? { 'webhook-id': id, 'webhook-timestamp': o.timestamp, 'webhook-signature': o.signature }
          : { 'X-ACW-Event-Id': id, 'X-ACW-Timestamp': o.timestamp, 'X-ACW-Signature': o.signature };
      const result = verifyWebhookDetailed({ secret: o.secret, headers, body, toleranceSeconds: tolerance });
      printJson(result.ok ? { valid: true, scheme: result.scheme, timestamp: result.timestamp } : { valid: false, reason: result.reason });
      if (!result.ok) process.exitCode = EXIT.failure;
    });
}
