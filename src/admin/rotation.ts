import { newSigningSecret } from '../crypto/signing-secret.js';
import { formatDuration, parseDuration, type Scheme } from '../config/index.js';
import { isStandardSecret } from '../config/rules.js';
import { ApiError, badField } from '../errors.js';
import { signingSecrets, type EndpointSecrets } from '../webhook/sign.js';
import { isPrintable } from './params.js';

/**
 * What a rotation of a stored endpoint's secret writes (docs/operations.md#rotating-a-secret), with
 * its checks, apart from the storage: the route (`POST /v1/endpoints/:name/rotate-secret`) and the
 * CLI (`endpoints rotate-secret`) write the plan's three fields to the endpoint, audit the change
 * without the secrets, and return `secret_next` once. webhook/sign.ts signingSecrets then signs with
 * both until `rotate_until` and with `secret_next` alone after it.
 */

export const MIN_OVERLAP_MS = 60_000;
export const MAX_OVERLAP_MS = 30 * 24 * 3600_000;
export const DEFAULT_OVERLAP = '24h';
/** A given secret shorter than this (characters; for `scheme: standard` key bytes) is refused. */
export const MIN_SECRET_LENGTH = 16;

export interface RotationInput {
  /** How long both secrets sign: a duration from 1m to 720h (30 days); default 24h. */
  overlap?: string | undefined;
  /** The new secret; generated when absent. */
  secret?: string | undefined;
}

export interface RotationPlan {
  /** The secret in force now (the old one during the overlap): the endpoint's new `secret`. */
  secret: string;
  /** The new secret: the endpoint's new `secret_next`. */
  secret_next: string;
  /** The end of the overlap, epoch ms: the endpoint's new `rotate_until`. */
  rotate_until: number;
  /** True when the service made the secret (the caller must show it once: it is not shown again). */
  generated: boolean;
}

/**
 * The rotation of an endpoint now: its secret in force becomes `secret` (after a finished overlap
 * that is the previous `secret_next`), the new one `secret_next`, until now + overlap. A 400 names
 * `overlap` or `secret` (never echoing a secret); a rotation still in its overlap is a 409.
 */
export function planRotation(ep: EndpointSecrets & { readonly scheme: Scheme }, input: RotationInput, nowMs = Date.now()): RotationPlan {
  const overlap = overlapMs(input.overlap);
  const current = signingSecrets(ep, nowMs);
  if (current.next !== undefined) {
    const until = new Date(ep.rotate_until!).toISOString();
    throw new ApiError(409, 'rotation_in_progress', `secret: a rotation is under way until ${until}: rotate again after it`, {
      field: 'secret',
      rotate_until: until,
    });
  }
  const given = input.secret;
  if (given !== undefined) checkSecret(given, ep.scheme);
  if (given !== undefined && given === current.secret) throw badField('secret', 'is the secret in use now: a rotation needs a new one');
  return {
    secret: current.secret,
    secret_next: given ?? newSigningSecret(ep.scheme),
    rotate_until: nowMs + overlap,
    generated: given === undefined,
  };
}

function overlapMs(value: string | undefined): number {
  let ms: number;
  try {
    ms = parseDuration(value ?? DEFAULT_OVERLAP);
  } catch {
    throw badField('overlap', `expected a duration like "24h", got ${JSON.stringify(String(value).slice(0, 40))}`);
  }
  if (ms < MIN_OVERLAP_MS || ms > MAX_OVERLAP_MS) {
    throw badField('overlap', `must be from 1m to 720h (30 days), got ${formatDuration(ms)}`);
  }
  return ms;
}

/** Long enough, and of the scheme's form; the message gives the length, never the text. */
function checkSecret(secret: unknown, scheme: Scheme): void {
  if (typeof secret !== 'string' || !isPrintable(secret) || /\s/.test(secret)) {
    throw badField('secret', 'expected printable characters without spaces');
  }
  if (scheme === 'standard') {
    if (!isStandardSecret(secret))
      throw badField('secret', `scheme "standard" needs a secret like "whsec_<base64>", got ${secret.length} characters`);
    const bytes = Buffer.from(secret.slice('whsec_'.length), 'base64').length;
    if (bytes < MIN_SECRET_LENGTH) throw badField('secret', `too short: a key of at least ${MIN_SECRET_LENGTH} bytes, got ${bytes}`);
  } else if (secret.length < MIN_SECRET_LENGTH) {
    throw badField('secret', `too short: at least ${MIN_SECRET_LENGTH} characters, got ${secret.length}`);
  }
}
