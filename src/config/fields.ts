/**
 * Building blocks of the config schema, each with a message that reads well after a key path.
 * Messages echo the offending value, except for secret-bearing fields (`showSecret`).
 */
import { z } from 'zod';
import { parseDuration, parseSize } from './duration.js';
import { show, showSecret } from './errors.js';
import { parseListen } from './listen.js';
import { redactUrl } from './redact-url.js';
import { isValidTopicPattern } from './topics.js';
import { parseKey } from '../crypto/secret-box.js';
import { parseCidr } from '../net/ranges.js';

interface HasInput {
  readonly input?: unknown;
}

// `${VAR}` interpolation always yields text, so numeric and boolean keys accept their text form.
const NUMERIC = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const fromText = (v: unknown): unknown => {
  if (typeof v !== 'string') return v;
  if (NUMERIC.test(v.trim())) return Number(v);
  if (/^(?:true|false)$/i.test(v)) return v.toLowerCase() === 'true';
  return v;
};

export function int(min: number, max: number) {
  const error = (iss: HasInput) => `expected an integer from ${min} to ${max}, got ${show(iss.input)}`;
  return z.preprocess(fromText, z.number({ error }).int({ error }).min(min, { error }).max(max, { error }));
}

const fractionError = (iss: HasInput) => `expected a number from 0 to 1, got ${show(iss.input)}`;

export function fraction() {
  const error = fractionError;
  return z.preprocess(fromText, z.number({ error }).min(0, { error }).max(1, { error }));
}

export function bool() {
  return z.preprocess(fromText, z.boolean({ error: (iss) => `expected true or false, got ${show(iss.input)}` }));
}

export function text() {
  return z.string({ error: (iss) => `expected a string, got ${show(iss.input)}` });
}

/** A secret or token: its value never appears in a message. */
export function secretText() {
  return z.string({ error: (iss) => `expected a string, got ${showSecret(iss.input)}` });
}

export function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  const choices = values.map((v) => JSON.stringify(v)).join(', ');
  return z.enum(values, { error: (iss) => `expected one of ${choices}, got ${show(iss.input)}` });
}

export function pattern(re: RegExp, what: string) {
  return text().regex(re, { error: (iss) => `expected ${what}, got ${show(iss.input)}` });
}

/** A Go-style duration, parsed to milliseconds; `positive` rejects `0s` where zero would spin. */
export function duration(opts: { positive?: boolean } = {}) {
  return z.unknown().transform((v, ctx) => {
    let ms: number | undefined;
    try {
      if (typeof v === 'string') ms = parseDuration(v);
    } catch {
      // reported below with the key path
    }
    if (ms === undefined) {
      ctx.addIssue({ code: 'custom', message: `expected a duration like "5m", got ${show(v)}`, input: v });
      return z.NEVER;
    }
    if (opts.positive && ms <= 0) {
      ctx.addIssue({ code: 'custom', message: `must be longer than 0, got ${show(v)}`, input: v });
      return z.NEVER;
    }
    return ms;
  });
}

/** Deliveries per second from `N/s` or `N/min` (N a positive number); `""` means no limit (0). */
export function rateLimit() {
  return z.unknown().transform((v, ctx) => {
    if (v === '' || v === null || v === undefined) return 0;
    const m = typeof v === 'string' ? /^\s*(\d+(?:\.\d+)?)\s*\/\s*(s|sec|second|m|min|minute)\s*$/.exec(v) : null;
    const n = m ? Number(m[1]) : NaN;
    if (!m || !(n > 0) || n > 1_000_000) {
      ctx.addIssue({ code: 'custom', message: `expected a rate like "20/s" or "600/min" (more than 0), got ${show(v)}`, input: v });
      return z.NEVER;
    }
    return m[2]!.startsWith('s') ? n : n / 60;
  });
}

const RFC3339 = /^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)$/;

/** An RFC 3339 instant with its offset ("2026-12-01T06:00:00Z"), parsed to epoch milliseconds. */
export function instant() {
  return z.unknown().transform((v, ctx) => {
    const ms = typeof v === 'string' && RFC3339.test(v.trim()) ? Date.parse(v.trim()) : NaN;
    if (Number.isNaN(ms)) {
      ctx.addIssue({ code: 'custom', message: `expected an RFC 3339 time like "2026-12-01T06:00:00Z", got ${show(v)}`, input: v });
      return z.NEVER;
    }
    return ms;
  });
}

/** A byte size like `1mb`, parsed to bytes. */
export function size() {
  return z.unknown().transform((v, ctx) => {
    try {
      if (typeof v === 'string') return parseSize(v);
    } catch {
      // reported below with the key path
    }
    ctx.addIssue({ code: 'custom', message: `expected a size like "1mb", got ${show(v)}`, input: v });
    return z.NEVER;
  });
}

export function listen() {
  return text().refine((s) => isListen(s), {
    error: (iss) => `expected HOST:PORT like "127.0.0.1:8080" (port 0-65535), got ${show(iss.input)}`,
  });
}

function isListen(s: string): boolean {
  try {
    parseListen(s);
    return true;
  } catch {
    return false;
  }
}

/** An http(s) URL; `optional` admits `""` (no endpoint). Echoed with credentials hidden (redactUrl), only the scheme once it parses. */
export function httpUrl(opts: { optional?: boolean } = {}) {
  return text().superRefine((s, ctx) => {
    if (s === '' && opts.optional) return;
    let url: URL | undefined;
    try {
      url = new URL(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${show(redactUrl(s))}`, input: redactUrl(s) });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got a "${url.protocol}" URL` });
    }
  });
}

/** Empty (embedded PostgreSQL) or a postgres:// URL; never echoed, it may hold a password. */
export function databaseUrl() {
  return secretText().refine((s) => s === '' || /^postgres(?:ql)?:\/\/\S*$/.test(s), {
    error: () => 'expected a postgres:// or postgresql:// URL, or "" for embedded PostgreSQL',
  });
}

export function list<T extends z.ZodType>(item: T) {
  return z.array(item, { error: (iss) => `expected a list, got ${show(iss.input)}` });
}

export function topics() {
  const item = text().refine(isValidTopicPattern, {
    error: (iss) => `expected a topic like "workspace.sync_failed", a pattern like "workspace.*", or "*", got ${show(iss.input)}`,
  });
  return list(item);
}

/** An AES-256 key as base64 of 32 bytes, or `""` (none); never echoed. */
export function encryptionKey() {
  return secretText().superRefine((s, ctx) => {
    if (s === '') return;
    const key = parseKey(s);
    if (typeof key === 'string') ctx.addIssue({ code: 'custom', message: key });
  });
}

/** Networks like `10.0.0.0/8` or `fd00::/8` (a bare address is a /32 or /128); each refusal names its index. */
export function cidrs() {
  const item = text().superRefine((s, ctx) => {
    const parsed = parseCidr(s);
    if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed, input: s });
  });
  return list(item);
}

// Headers the service sets itself; letting config override them would break signing or framing.
const RESERVED_HEADER = /^(?:x-acw-.*|webhook-(?:id|timestamp|signature)|content-(?:type|length)|host|connection|transfer-encoding)$/i;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Extra request headers; values may hold credentials, so they are never echoed. */
export function headers() {
  const name = text()
    .regex(HEADER_NAME, { error: (iss) => `expected an HTTP header name, got ${show(iss.input)}` })
    .refine((n) => !RESERVED_HEADER.test(n), {
      error: (iss) => `${show(iss.input)} is set by the service and cannot be configured`,
    });
  const value = z.preprocess(
    (v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v),
    secretText().refine((v) => !/[\r\n\0]/.test(v), { error: () => 'a header value must not contain line breaks' }),
  );
  return z.record(name, value, { error: (iss) => `expected a mapping of header names to values, got ${show(iss.input)}` });
}

/** A strict mapping: unknown keys are reported (with a suggestion) by validate.ts. */
/** A JSON object as written (a JSON Schema): compiled where it is used, not here. */
export function jsonObject() {
  return z.record(z.string(), z.unknown(), { error: (iss) => `expected a mapping (a JSON Schema object), got ${show(iss.input)}` });
}

export function strict<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.strictObject(shape, {
    error: (iss) => (iss.code === 'invalid_type' ? `expected a mapping, got ${show(iss.input)}` : undefined),
  });
}
