import type { Command } from 'commander';
import { verifyWebhookDetailed } from '../../verify.js';
import { EXIT, ExitError, printJson, readArg } from '../context.js';

interface VerifyOptions {
  secret: string[];
  timestamp: string;
  signature: string;
  signatureNext?: string;
  body: string;
  id?: string;
  scheme?: string;
  tolerance: string;
}

/** Commander collector for a repeatable option. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function registerVerify(program: Command): void {
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
    .action(async (o: VerifyOptions) => {
      const tolerance = Number(o.tolerance);
      if (!Number.isFinite(tolerance) || tolerance < 0)
        throw new ExitError(EXIT.usage, `--tolerance: expected seconds, got ${JSON.stringify(o.tolerance)}`);
      if (o.scheme !== 'acw' && o.scheme !== 'standard')
        throw new ExitError(EXIT.usage, `--scheme: expected acw or standard, got ${JSON.stringify(o.scheme)}`);
      if (o.signatureNext !== undefined && o.scheme !== 'acw')
        throw new ExitError(
          EXIT.usage,
          '--signature-next: only the acw scheme sends it (standard puts both signatures in webhook-signature)',
        );
      const body = await readArg(o.body);
      const id = o.id ?? '00000000-0000-0000-0000-000000000000';
      const headers: Record<string, string> =
        o.scheme === 'standard'
          ? { 'webhook-id': id, 'webhook-timestamp': o.timestamp, 'webhook-signature': o.signature }
          : { 'X-ACW-Event-Id': id, 'X-ACW-Timestamp': o.timestamp, 'X-ACW-Signature': o.signature };
      if (o.signatureNext !== undefined) headers['X-ACW-Signature-Next'] = o.signatureNext;
      const result = verifyWebhookDetailed({ secret: o.secret, headers, body, toleranceSeconds: tolerance });
      printJson(
        result.ok
          ? {
              valid: true,
              scheme: result.scheme,
              timestamp: result.timestamp,
              ...(o.secret.length > 1 ? { secret_index: result.secretIndex } : {}),
            }
          : { valid: false, reason: result.reason },
      );
      if (!result.ok) process.exitCode = EXIT.failure;
    });
}
