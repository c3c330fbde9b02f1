// The client's answer and error types (src/client.ts re-exports them; acw-webhooks/client is the
// entry point): what a call resolves with, and what it throws, with a failed batch's progress.
import type { z } from 'zod';
import type { notifyAnswer } from './http/contract/answers.js';

export type NotifyResult = z.output<typeof notifyAnswer>;

/** Half-open index ranges into the events passed to `notifyBatch`: `start <= i < end`. */
export interface IndexRange {
  start: number;
  end: number;
}

/**
 * How far a failed `notifyBatch` got. It sends `MAX_BATCH_EVENTS` at a time, in order, each request
 * all or nothing: `results` answers `events[0 .. results.length - 1]` (committed), `failed` is the
 * request that failed (nothing of it written, unless its answer was lost: status 0 or 5xx), and
 * `notSent` the events after it (empty when `start === end`). The same call again with the same keys
 * replays what was committed.
 */
export interface BatchProgress {
  results: NotifyResult[];
  failed: IndexRange;
  notSent: IndexRange;
}

/** No HTTP response at all: `status` is 0 and `code` is one of these. */
export type TransportErrorCode = 'network_error' | 'timeout';

/**
 * A refused or failed call. `status`/`code`/`details` come from the server's
 * `{error: {code, message, details?}}` body; `status` is 0 when no response arrived.
 */
export class AcwError extends Error {
  override readonly name = 'AcwError';
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  /** How many HTTP attempts were made (0 when refused before sending). */
  readonly attempts: number;
  /** What the server's Retry-After asked for, when it sent one. */
  readonly retryAfterMs: number | undefined;
  /** Set when `notifyBatch` failed after sending: what was committed and what was not. */
  readonly batch: BatchProgress | undefined;

  constructor(
    message: string,
    init: {
      status: number;
      code: string;
      details?: unknown;
      attempts?: number;
      retryAfterMs?: number;
      batch?: BatchProgress;
      cause?: unknown;
    },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.attempts = init.attempts ?? 0;
    this.retryAfterMs = init.retryAfterMs;
    this.batch = init.batch;
  }
}

/**
 * `err` from the request for `events[offset ..]` as the caller sees it: `events[i]` in its message and
 * details counted from the start of the caller's list, and the progress attached. Used by the
 * in-memory test client too, so both say it alike.
 */
export function batchFailure(err: AcwError, offset: number, progress: BatchProgress): AcwError {
  const shift = (v: unknown): unknown => {
    if (typeof v === 'string') return v.replace(/events\[(\d+)\]/g, (_, i: string) => `events[${Number(i) + offset}]`);
    if (Array.isArray(v)) return v.map(shift);
    if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shift(x)]));
    return v;
  };
  const { failed, notSent } = progress;
  const split = progress.results.length > 0 || notSent.end > notSent.start;
  const where = split
    ? ` (events ${failed.start}..${failed.end - 1} failed; ${progress.results.length} before them committed, ${notSent.end - notSent.start} after them not sent)`
    : '';
  return new AcwError((shift(err.message) as string) + where, {
    status: err.status,
    code: err.code,
    details: shift(err.details),
    attempts: err.attempts,
    ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
    batch: progress,
    ...(err.cause !== undefined ? { cause: err.cause } : {}),
  });
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
