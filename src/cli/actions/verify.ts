import { verifyWebhookDetailed } from '../../verify.js';
import { EXIT, ExitError } from '../exit.js';
import { printJson, readArg, type CliIo } from '../io.js';

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

/** `verify`: exit 0 when the signature is valid, 1 when not. */
export async function verify(io: CliIo, o: VerifyOptions): Promise<number> {
  const tolerance = Number(o.tolerance);
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new ExitError(EXIT.usage, `--tolerance: expected seconds, got ${JSON.stringify(o.tolerance)}`);
  if (o.scheme !== 'acw' && o.scheme !== 'standard')
    throw new ExitError(EXIT.usage, `--scheme: expected acw or standard, got ${JSON.stringify(o.scheme)}`);
  if (o.signatureNext !== undefined && o.scheme !== 'acw')
    throw new ExitError(EXIT.usage, '--signature-next: only the acw scheme sends it (standard puts both signatures in webhook-signature)');
  const body = await readArg(io, o.body);
  const id = o.id ?? '00000000-0000-0000-0000-000000000000';
  const headers: Record<string, string> =
    o.scheme === 'standard'
      ? { 'webhook-id': id, 'webhook-timestamp': o.timestamp, 'webhook-signature': o.signature }
      : { 'X-ACW-Event-Id': id, 'X-ACW-Timestamp': o.timestamp, 'X-ACW-Signature': o.signature };
  if (o.signatureNext !== undefined) headers['X-ACW-Signature-Next'] = o.signatureNext;
  const result = verifyWebhookDetailed({ secret: o.secret, headers, body, toleranceSeconds: tolerance });
  printJson(
    io,
    result.ok
      ? {
          valid: true,
          scheme: result.scheme,
          timestamp: result.timestamp,
          ...(o.secret.length > 1 ? { secret_index: result.secretIndex } : {}),
        }
      : { valid: false, reason: result.reason },
  );
  return result.ok ? EXIT.ok : EXIT.failure;
}
