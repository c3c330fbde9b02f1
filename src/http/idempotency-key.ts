import { ApiError } from '../errors.js';
import { idempotencyKey } from '../notify/input.js';

/** The header's name as documented; Node gives it lower-cased. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/**
 * The `Idempotency-Key` header of `POST /v1/notify` (docs/integrate.md#idempotency-keys): bare, as
 * Stripe and Svix send it, or a quoted string as the IETF draft's structured field has it
 * (`"k-1"`, with `\"` and `\\` escapes). The key then follows the body field's rules. Two headers
 * arrive joined by ", ", which no key can contain: a 400.
 */
export function headerIdempotencyKey(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(', ') : value;
  const quoted = /^"((?:[^"\\]|\\["\\])*)"$/.exec(text);
  const key = quoted ? quoted[1]!.replace(/\\(["\\])/g, '$1') : text;
  // A quote at one end only is a mangled quoted string rather than a key.
  const r = !quoted && /^"|"$/.test(text) ? null : idempotencyKey.safeParse(key);
  if (!r?.success) {
    const why = r?.error.issues[0]?.message ?? 'an unterminated quoted string';
    throw new ApiError(400, 'invalid_input', `idempotency-key: ${why} (bare or as a quoted string)`, { field: 'idempotency-key' });
  }
  return r.data;
}

/** The key of a notify: the header's or the body field's; both given, they must be the same. */
export function notifyKey(header: string | undefined, body: string | undefined): string | undefined {
  if (header === undefined) return body;
  if (body !== undefined && body !== header) {
    throw new ApiError(400, 'invalid_input', 'idempotency_key: differs from the Idempotency-Key header; send one, or the same in both', {
      field: 'idempotency_key',
      header: 'idempotency-key',
    });
  }
  return header;
}
