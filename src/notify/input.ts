import { z } from 'zod';
import { isValidTopic } from '../config/topics.js';

/** A single event's data is limited to 256 KiB once serialised (config.example.yaml, server.max_body). */
export const MAX_DATA_BYTES = 256 * 1024;
/** Deeper nesting than this is refused: no legitimate payload needs it and the database recurses on it. */
export const MAX_DEPTH = 64;
export const MAX_BATCH = 1000;

/** Whether `value` nests deeper than `limit`; the recursion stops there, so it is bounded too. */
function deeperThan(value: unknown, limit: number, depth = 1): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (depth > limit) return true;
  if (Array.isArray(value)) {
    for (const child of value) if (deeperThan(child, limit, depth + 1)) return true;
  } else {
    for (const k in value) {
      if (Object.hasOwn(value, k) && deeperThan((value as Record<string, unknown>)[k], limit, depth + 1)) return true;
    }
  }
  return false;
}

const ESCAPED_NUL = /(?<!\\)(?:\\\\)*\\u0000/;
const ESCAPED_SURROGATE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/;

/**
 * The JSON text eventData's check made of each object it accepted, so that notify can put the data
 * into its rows and bodies without serialising it again. Weak: it lives as long as the value does.
 * A validated value must not be changed afterwards (nothing here does).
 */
const serialised = new WeakMap<object, string>();

/** The JSON text of an event's data: the one its validation made, or JSON.stringify's (undefined as null). */
export function dataJson(value: unknown): string {
  if (typeof value === 'object' && value !== null) {
    const text = serialised.get(value);
    if (text !== undefined) return text;
  }
  return JSON.stringify(value === undefined ? null : value);
}

/** JSON data an event may carry: serialisable, no NUL characters or lone surrogates (PostgreSQL's jsonb refuses them), bounded. */
export const eventData = z.unknown().superRefine((value, ctx) => {
  if (value === undefined) {
    ctx.addIssue({ code: 'custom', message: 'is required (any JSON value, null included)' });
    return;
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value) as string | undefined;
  } catch {
    text = undefined;
  }
  // A function, a symbol or a toJSON() answering undefined serialises to nothing.
  if (text === undefined) {
    ctx.addIssue({ code: 'custom', message: 'must be JSON-serialisable' });
    return;
  }
  if (Buffer.byteLength(text) > MAX_DATA_BYTES)
    ctx.addIssue({
      code: 'too_big',
      origin: 'string',
      maximum: MAX_DATA_BYTES,
      message: `must be at most ${MAX_DATA_BYTES} bytes of JSON`,
    });
  // JSON.stringify writes NUL and lone surrogates as \u escapes (a proper surrogate pair stays raw);
  // PostgreSQL's jsonb refuses both. An escape preceded by an odd run of backslashes is the text "\u…".
  // Both are \u escapes, which most data has none of.
  const escaped = text.includes('\\u');
  if (escaped && ESCAPED_NUL.test(text)) ctx.addIssue({ code: 'custom', message: 'must not contain NUL characters (\\u0000)' });
  if (escaped && ESCAPED_SURROGATE.test(text))
    ctx.addIssue({ code: 'custom', message: 'must be valid Unicode (a lone surrogate such as \\ud800 was found)' });
  if (deeperThan(value, MAX_DEPTH)) ctx.addIssue({ code: 'custom', message: `must not nest deeper than ${MAX_DEPTH} levels` });
  else if (typeof value === 'object' && value !== null) serialised.set(value, text);
});

export const topicField = z.string().max(200).refine(isValidTopic, {
  message: 'expected lowercase dot-separated words like "workspace.sync_failed" ([a-z0-9_] words joined by dots)',
});

/** An idempotency key: the body field, and POST /v1/notify's `Idempotency-Key` header. */
export const idempotencyKey = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'expected printable ASCII without spaces');

/** An ordering key (docs/operations.md#ordered-delivery): any text of 1 to 256 bytes (UTF-8). */
export const MAX_ORDERING_KEY_BYTES = 256;
export const orderingKey = z
  .string()
  .min(1)
  .max(MAX_ORDERING_KEY_BYTES)
  .refine((k) => Buffer.byteLength(k) <= MAX_ORDERING_KEY_BYTES, { message: `must be at most ${MAX_ORDERING_KEY_BYTES} bytes (UTF-8)` })
  .refine((k) => !k.includes('\u0000'), { message: 'must not contain NUL characters' });

export const notifyInput = z.strictObject({
  topic: topicField,
  data: eventData,
  recipients: z
    .array(
      z
        .string()
        .min(1)
        .max(64)
        .regex(/^[A-Za-z0-9_.@-]+$/, 'expected a user name'),
    )
    .max(1000)
    .optional(),
  idempotency_key: idempotencyKey.optional(),
  ordering_key: orderingKey
    .optional()
    .describe('events with the same key reach each endpoint one at a time, in order (docs/operations.md#ordered-delivery)'),
});
export type NotifyInput = z.infer<typeof notifyInput>;

export const notifyBatchInput = z.strictObject({
  events: z.array(notifyInput).min(1).max(MAX_BATCH),
});
