import { createHmac } from 'node:crypto';
import { VERSION } from '../version.js';

export type SignatureScheme = 'acw' | 'standard';

const STANDARD_SECRET_PREFIX = 'whsec_';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** `sha256=<hex>` of HMAC-SHA256(secret, `<ts>.` + body): the `X-ACW-Signature` value (README.md#receiving-webhooks). */
export function signAcw(secret: string, timestamp: number, body: string): string {
  assertTimestamp(timestamp);
  // A string key is taken as its UTF-8 bytes, as Buffer.from(secret, 'utf8') would give.
  const mac = createHmac('sha256', secret).update(`${timestamp}.`).update(body, 'utf8');
  return `sha256=${mac.digest('hex')}`;
}

/** `v1,<base64>` of HMAC-SHA256(base64-decoded secret, `<id>.<ts>.<body>`): the Standard Webhooks signature. */
export function signStandard(secret: string, id: string, timestamp: number, body: string): string {
  assertTimestamp(timestamp);
  const key = decodeStandardSecret(secret);
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body, 'utf8');
  return `v1,${mac.digest('base64')}`;
}

/** The key bytes of a `whsec_<base64>` secret; throws (without echoing the secret) when it is not one. */
export function decodeStandardSecret(secret: string): Buffer {
  const encoded = secret.startsWith(STANDARD_SECRET_PREFIX) ? secret.slice(STANDARD_SECRET_PREFIX.length) : '';
  // Buffer.from(.., 'base64') silently skips junk, so validate the alphabet first.
  if (!BASE64.test(encoded)) throw new TypeError('standard webhook secret must be whsec_<base64>');
  return Buffer.from(encoded, 'base64');
}

function assertTimestamp(timestamp: number): void {
  // A fractional or negative timestamp would be signed but rejected by every receiver.
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError('timestamp must be a non-negative integer (Unix seconds)');
}

/** What an endpoint carries for signing: its secret and, during a rotation, the new one and the end of the overlap (epoch ms). */
export interface EndpointSecrets {
  readonly secret: string;
  readonly secret_next?: string | undefined;
  readonly rotate_until?: number | undefined;
}

/** The secrets that sign an attempt: `secret` alone, or with `next` during a rotation's overlap. */
export interface SigningSecrets {
  secret: string;
  next?: string;
}

/**
 * Which secrets sign an attempt made at `nowMs` (docs/operations.md#rotating-a-secret): before
 * `rotate_until` the old secret and the new one (X-ACW-Signature and X-ACW-Signature-Next, or both
 * in webhook-signature), from it on the new one alone. Read at every attempt, so a retry of an old
 * job signs with the secrets current when it is sent.
 */
export function signingSecrets(ep: EndpointSecrets, nowMs: number): SigningSecrets {
  const next = ep.secret_next;
  if (next === undefined || next === '' || ep.rotate_until === undefined) return { secret: ep.secret };
  return nowMs < ep.rotate_until ? { secret: ep.secret, next } : { secret: next };
}

export interface BuildHeadersOptions {
  scheme: SignatureScheme;
  secret: string;
  /** During a rotation's overlap, the new secret (see signingSecrets): a second signature. */
  secretNext?: string | undefined;
  /** The job's UUID: stable across retries, receivers deduplicate on it. */
  jobId: string;
  topic: string;
  /** The topic's schema version the event was validated against (docs/receivers.md). */
  schemaVersion?: number | undefined;
  /** The exact body bytes that will be sent. */
  body: string;
  /** Unix seconds when this attempt is signed. */
  timestamp: number;
  /** Endpoint-configured headers; they can never replace a protocol header. Only read. */
  extra?: Readonly<Record<string, string>>;
  /** A keyed event's ordering key and its number within it for this endpoint (docs/receivers.md#ordered-events). */
  orderingKey?: string | null | undefined;
  orderingSeq?: number | null | undefined;
}

/**
 * The X-ACW-Ordering-Key value: the key itself when it is printable ASCII without `%`, else its
 * UTF-8 percent-encoded (encodeURIComponent). A receiver's decodeURIComponent gives the key either way.
 */
export function orderingKeyHeader(key: string): string {
  return /^[\x21-\x24\x26-\x7e]+$/.test(key) ? key : encodeURIComponent(key);
}

// Headers the protocol owns (either scheme) or that undici must compute/rejects: an endpoint's
// `extra` may not set them, compared case-insensitively.
const RESERVED = new Set([
  'content-type',
  'user-agent',
  'x-acw-topic',
  'x-acw-schema-version',
  'x-acw-event-id',
  'x-acw-timestamp',
  'x-acw-signature',
  'x-acw-signature-next',
  'x-acw-ordering-key',
  'x-acw-sequence',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
]);

const USER_AGENT = `acw-webhooks/${VERSION}`;

/** The request headers for one attempt: endpoint extras first, then the protocol headers (README.md#receiving-webhooks). */
export function buildHeaders(opts: BuildHeadersOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const extra = opts.extra;
  if (extra) {
    for (const name of Object.keys(extra)) {
      if (!RESERVED.has(name.toLowerCase())) headers[name] = extra[name] as string;
    }
  }
  headers['content-type'] = 'application/json';
  headers['user-agent'] = USER_AGENT;
  headers['X-ACW-Topic'] = opts.topic;
  if (opts.schemaVersion !== undefined) headers['X-ACW-Schema-Version'] = String(opts.schemaVersion);
  // In both schemes, as X-ACW-Topic: Standard Webhooks has no header of its own for them.
  if (opts.orderingKey != null) {
    headers['X-ACW-Ordering-Key'] = orderingKeyHeader(opts.orderingKey);
    if (opts.orderingSeq != null) headers['X-ACW-Sequence'] = String(opts.orderingSeq);
  }
  if (opts.scheme === 'acw') {
    headers['X-ACW-Event-Id'] = opts.jobId;
    headers['X-ACW-Timestamp'] = String(opts.timestamp);
    // No secret, no signature: only an alert sink of format slack goes without one (every endpoint
    // needs a secret), and an HMAC under an empty key would prove nothing.
    if (opts.secret === '') return headers;
    headers['X-ACW-Signature'] = signAcw(opts.secret, opts.timestamp, opts.body);
    // The old secret keeps X-ACW-Signature, so a receiver that knows one secret verifies all through the overlap.
    if (opts.secretNext !== undefined) headers['X-ACW-Signature-Next'] = signAcw(opts.secretNext, opts.timestamp, opts.body);
  } else {
    headers['webhook-id'] = opts.jobId;
    headers['webhook-timestamp'] = String(opts.timestamp);
    const sig = signStandard(opts.secret, opts.jobId, opts.timestamp, opts.body);
    // Standard Webhooks: several signatures, space-separated; a receiver accepts any that matches.
    headers['webhook-signature'] =
      opts.secretNext === undefined ? sig : `${sig} ${signStandard(opts.secretNext, opts.jobId, opts.timestamp, opts.body)}`;
  }
  return headers;
}
