// Receiver-side verification (`acw-webhooks/verify`). Deliberately depends on node:crypto only.
import { createHmac, timingSafeEqual } from 'node:crypto';

export type WebhookScheme = 'acw' | 'standard';

export type VerifyFailureReason =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'signature_mismatch'
  | 'bad_secret';

export type VerifyResult =
  | {
      ok: true;
      scheme: WebhookScheme;
      timestamp: number;
      id: string;
      /** Which of the secrets given matched (0 for a single secret): during a rotation, whether the new one works yet. */
      secretIndex: number;
    }
  | { ok: false; reason: VerifyFailureReason };

/** Anything with a Fetch-style `get` (the global `Headers`, undici's `Headers`). */
export interface HeadersLike {
  get(name: string): string | null;
}

/** A Fetch `Headers`, or a plain object in any header-name case (Node's `req.headers` included). */
export type WebhookHeaders = HeadersLike | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /**
   * The endpoint secret; for `scheme: standard` deliveries a `whsec_<base64>` string. During a
   * rotation, a list (old and new, in any order): a delivery signed with any of them is accepted.
   */
  secret: string | readonly string[];
  headers: WebhookHeaders;
  /** The raw request body, byte for byte (not re-serialised JSON). */
  body: string | Buffer | Uint8Array;
  /** Accepted clock difference either way, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** The current time (ms since the epoch, or a Date); defaults to `Date.now()`. */
  now?: number | Date;
}

const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const TIMESTAMP = /^[0-9]{1,15}$/;

/** `true` when the delivery is authentic and fresh. */
export function verifyWebhook(opts: VerifyWebhookOptions): boolean {
  return verifyWebhookDetailed(opts).ok;
}

/** Like `verifyWebhook`, with the reason for a rejection; never includes secrets or signatures. */
export function verifyWebhookDetailed(opts: VerifyWebhookOptions): VerifyResult {
  const tolerance = opts.toleranceSeconds ?? 300;
  if (!Number.isFinite(tolerance) || tolerance < 0) throw new RangeError('toleranceSeconds must be a non-negative number');
  const get = headerReader(opts.headers);
  const body = toBuffer(opts.body);
  const nowMs = opts.now instanceof Date ? opts.now.getTime() : (opts.now ?? Date.now());

  const secrets: readonly string[] = typeof opts.secret === 'string' ? [opts.secret] : opts.secret;
  // A list that is not one (a plain JS caller) or is empty is a setup mistake, as an empty secret is.
  if (!Array.isArray(secrets) || secrets.length === 0 || !secrets.every((s) => typeof s === 'string')) return fail('bad_secret');

  const acwSig = get('x-acw-signature');
  const stdSig = get('webhook-signature');
  if (acwSig !== undefined) return verifyAcw(secrets, get, acwSig, body, nowMs, tolerance);
  if (stdSig !== undefined) return verifyStandard(secrets, get, stdSig, body, nowMs, tolerance);
  return fail('missing_header');
}

type Reader = (name: string) => string[] | undefined;

/** A `sha256=<hex>` header value as MAC bytes, or undefined when malformed (or sent twice with different values). */
function acwMac(values: string[]): Buffer | undefined {
  const sig = single(values);
  if (sig === undefined || !sig.startsWith('sha256=') || !HEX.test(sig.slice(7))) return undefined;
  return Buffer.from(sig.slice(7), 'hex');
}

/**
 * X-ACW-Signature, and X-ACW-Signature-Next when a rotation sends it (docs/operations.md#rotating-a-secret):
 * the delivery is authentic when any secret given matches either header.
 */
function verifyAcw(
  secrets: readonly string[],
  get: Reader,
  sigValues: string[],
  body: Buffer,
  nowMs: number,
  tolerance: number,
): VerifyResult {
  if (secrets.some((s) => s.length === 0)) return fail('bad_secret');
  const tsValues = get('x-acw-timestamp');
  const idValues = get('x-acw-event-id');
  if (tsValues === undefined || idValues === undefined) return fail('missing_header');
  const ts = single(tsValues);
  const id = single(idValues);
  if (ts === undefined || id === undefined || id === '') return fail('malformed_header');
  const macs = [acwMac(sigValues)];
  const nextValues = get('x-acw-signature-next');
  if (nextValues !== undefined) macs.push(acwMac(nextValues));
  if (macs.some((m) => m === undefined)) return fail('malformed_header');
  const timestamp = parseTimestamp(ts);
  if (timestamp === undefined) return fail('malformed_header');
  const stale = checkWindow(timestamp, nowMs, tolerance);
  if (stale) return fail(stale);

  let matched = -1;
  // Every secret against every signature (no early exit), so timing does not reveal which matched.
  secrets.forEach((secret, i) => {
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.`).update(body).digest();
    for (const mac of macs) if (safeEqual(expected, mac as Buffer) && matched < 0) matched = i;
  });
  if (matched < 0) return fail('signature_mismatch');
  return { ok: true, scheme: 'acw', timestamp, id, secretIndex: matched };
}

function verifyStandard(
  secrets: readonly string[],
  get: Reader,
  sigValues: string[],
  body: Buffer,
  nowMs: number,
  tolerance: number,
): VerifyResult {
  const keys = secrets.map(standardKey);
  if (keys.some((k) => k === undefined)) return fail('bad_secret');
  const tsValues = get('webhook-timestamp');
  const idValues = get('webhook-id');
  if (tsValues === undefined || idValues === undefined) return fail('missing_header');
  const ts = single(tsValues);
  const id = single(idValues);
  if (ts === undefined || id === undefined || id === '') return fail('malformed_header');
  const timestamp = parseTimestamp(ts);
  if (timestamp === undefined) return fail('malformed_header');
  // Several space-separated `v<n>,<base64>` entries (key rotation); a joined duplicate header adds ", ".
  const entries = sigValues
    .join(' ')
    .split(/\s+/)
    .filter((t) => t !== '')
    .map((t) => t.replace(/,$/, ''));
  const parsed: { version: string; mac: string }[] = [];
  for (const entry of entries) {
    const comma = entry.indexOf(',');
    if (comma <= 0) continue;
    const version = entry.slice(0, comma);
    const mac = entry.slice(comma + 1);
    if (/^v[0-9a-z]+$/.test(version) && BASE64.test(mac)) parsed.push({ version, mac });
  }
  if (parsed.length === 0) return fail('malformed_header');
  const stale = checkWindow(timestamp, nowMs, tolerance);
  if (stale) return fail(stale);

  let matched = -1;
  // Check every secret against every candidate (no early exit) so timing does not reveal which entry matched.
  keys.forEach((key, i) => {
    const expected = createHmac('sha256', key as Buffer)
      .update(`${id}.${timestamp}.`)
      .update(body)
      .digest();
    for (const { version, mac } of parsed) {
      if (version === 'v1' && safeEqual(expected, Buffer.from(mac, 'base64')) && matched < 0) matched = i;
    }
  });
  if (matched < 0) return fail('signature_mismatch');
  return { ok: true, scheme: 'standard', timestamp, id, secretIndex: matched };
}

function fail(reason: VerifyFailureReason): VerifyResult {
  return { ok: false, reason };
}

/** timingSafeEqual throws on different lengths; a length difference is simply a mismatch. */
function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function standardKey(secret: string): Buffer | undefined {
  if (!secret.startsWith('whsec_')) return undefined;
  const encoded = secret.slice('whsec_'.length);
  // Buffer.from(.., 'base64') silently skips junk, so validate the alphabet first.
  return BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
}

function parseTimestamp(value: string): number | undefined {
  return TIMESTAMP.test(value.trim()) ? Number(value.trim()) : undefined;
}

function checkWindow(timestamp: number, nowMs: number, tolerance: number): VerifyFailureReason | undefined {
  const nowSec = Math.floor(nowMs / 1000);
  if (nowSec - timestamp > tolerance) return 'timestamp_too_old';
  if (timestamp - nowSec > tolerance) return 'timestamp_in_future';
  return undefined;
}

/** Exactly one distinct value, trimmed; a header sent twice with different values is malformed. */
function single(values: string[]): string | undefined {
  const distinct = new Set(values.map((v) => v.trim()));
  return distinct.size === 1 ? [...distinct][0] : undefined;
}

function toBuffer(body: string | Buffer | Uint8Array): Buffer {
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** Case-insensitive lookup returning every value of a header, or undefined when absent. */
function headerReader(headers: WebhookHeaders): Reader {
  if (typeof headers.get === 'function') {
    const h = headers as HeadersLike;
    return (name) => {
      const v = h.get(name);
      return v === null ? undefined : [v];
    };
  }
  const lower = new Map<string, string[]>();
  for (const [name, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (value === undefined) continue;
    const list = lower.get(name.toLowerCase()) ?? [];
    list.push(...(Array.isArray(value) ? value : [value]));
    lower.set(name.toLowerCase(), list);
  }
  return (name) => {
    const v = lower.get(name);
    return v === undefined || v.length === 0 ? undefined : v;
  };
}
