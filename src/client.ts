// The HTTP client for POST /v1/notify (`acw-webhooks/client`). Deliberately depends on the global
// fetch, node:crypto and (on first use, for the caller's trace context) @opentelemetry/api only, so a
// service can import it without pulling in the server: its request and answer types come from the
// routes' own schemas (src/http/contract/), imported as types only.
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { notifyBody } from './http/schemas.js';
import { AcwError, batchFailure, isRecord, type NotifyResult } from './client-error.js';
import { activeCarrier } from './tracing/active.js';
import type { AnyTopics } from './topic-map.js';

export type { AnyTopics } from './topic-map.js';
export { AcwError, batchFailure, type BatchProgress, type IndexRange, type NotifyResult, type TransportErrorCode } from './client-error.js';

/** `POST /v1/notify`'s body as sent. */
type WireEvent = z.input<typeof notifyBody>;

/**
 * One event to notify: `POST /v1/notify`'s body (docs/api.md#post-v1notify), its key in camelCase:
 * `topic` (lowercase dot-separated words), `data` (any JSON value, null included, at most 256 KiB
 * serialised), `recipients` (user names that get an inbox message of the event, `GET /v1/notifications`),
 * `idempotencyKey` (the same key again answers with the first result and writes nothing; generated
 * when omitted), `orderingKey` (1 to 256 bytes: events with the same key reach each endpoint one at
 * a time, in order, docs/operations.md#ordered-delivery).
 */
export type NotifyEvent<T extends object = AnyTopics> = {
  [K in keyof T & string]: Omit<WireEvent, 'idempotency_key' | 'ordering_key' | 'topic' | 'data'> & {
    topic: K;
    data: T[K];
    idempotencyKey?: string;
    orderingKey?: string;
  };
}[keyof T & string];

export interface NotifyOptions {
  recipients?: string[];
  idempotencyKey?: string;
  orderingKey?: string;
  /** Aborts the call (the current attempt and any back-off wait); the abort reason is thrown. */
  signal?: AbortSignal;
}

/**
 * The server's answer to one event (docs/api.md#notifyanswer): `event_id`; `job_ids`, one webhook
 * job per matching endpoint, empty when `skipped` says why (`webhooks_disabled`,
 * `no_matching_endpoint`); `replayed`, the key was used before and this is the first answer again,
 * nothing new written; `warning`, no process running jobs has been seen in the last minute, so the
 * jobs wait until one runs (in a batch, the batch's warning on each of its events).
 */

/** What a service depends on to notify: the HTTP client and the in-memory test client both are one. */
export interface NotifyClient<T extends object = AnyTopics> {
  notify<K extends keyof T & string>(topic: K, data: T[K], opts?: NotifyOptions): Promise<NotifyResult>;
  /** All or nothing, in order. An empty list resolves to `[]` without a request. */
  notifyBatch(events: readonly NotifyEvent<T>[], opts?: { signal?: AbortSignal }): Promise<NotifyResult[]>;
}

export type AcwClient<T extends object = AnyTopics> = NotifyClient<T>;

/**
 * The server's limit of events per `POST /v1/notify/batch` (`MAX_BATCH` in src/notify/input.ts, kept
 * equal by a test: importing it would pull zod into the client). `notifyBatch` splits longer lists.
 */
export const MAX_BATCH_EVENTS = 1000;

export interface BackoffOptions {
  /** First retry waits up to this long (full jitter); it doubles per attempt. Default 100. */
  baseMs?: number;
  /** No wait is longer than this, Retry-After aside. Default 2000. */
  capMs?: number;
  /** A Retry-After longer than this is not waited for: the call fails with the 429/503. Default 60000. */
  maxRetryAfterMs?: number;
}

export interface ClientOptions {
  /** The service's base URL, e.g. `http://acw-webhooks:8080` (a path prefix is kept). */
  url: string;
  /** A `service` (or `admin`) user's token. */
  token: string;
  /** Per attempt, until the whole response body is read. Default 10000. */
  timeoutMs?: number;
  /** Further attempts after the first. Default 4. */
  retries?: number;
  /** Default `globalThis.fetch`. */
  fetch?: typeof globalThis.fetch;
  backoff?: BackoffOptions;
}

/** Statuses worth another attempt with the same idempotency key. Every other 4xx is final. */
function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 425 || status === 429;
}

/** Retry-After as delta-seconds or an HTTP date; null when absent or unreadable. */
function retryAfterMs(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function toResult(v: unknown, status: number, warning: unknown): NotifyResult | null {
  if (!isRecord(v) || typeof v.event_id !== 'string' || !Array.isArray(v.job_ids)) return null;
  if (!v.job_ids.every((j): j is string => typeof j === 'string')) return null;
  // The server says it per answer (per event in a batch). One older than that field said it only
  // by a 200 for the whole call: taken as is, so a client deployed first still works.
  const replayed = typeof v.replayed === 'boolean' ? v.replayed : status === 200;
  const r: NotifyResult = { event_id: v.event_id, job_ids: v.job_ids, replayed };
  if (typeof v.skipped === 'string') r.skipped = v.skipped;
  if (typeof v.schema_version === 'number') r.schema_version = v.schema_version;
  if (Array.isArray(v.warnings) && v.warnings.every((w): w is string => typeof w === 'string')) r.warnings = v.warnings;
  if (typeof warning === 'string') r.warning = warning;
  return r;
}

/** A thrown fetch failure in one line: fetch's own "fetch failed" says little, its cause says what (ECONNREFUSED...). */
function describe(e: unknown): string {
  const parts: string[] = [];
  for (let cur = e, depth = 0; cur !== undefined && cur !== null && depth < 4; depth++) {
    if (!isRecord(cur) && !(cur instanceof Error)) {
      parts.push(String(cur));
      break;
    }
    const { code, message, cause } = cur as { code?: unknown; message?: unknown; cause?: unknown };
    const text = [typeof code === 'string' && !String(message).includes(code) ? code : '', typeof message === 'string' ? message : '']
      .filter(Boolean)
      .join(' ');
    if (text) parts.push(text);
    cur = cause;
  }
  return parts.join(': ') || 'unknown error';
}

/** The wire shape of one event: snake_case, `recipients` and the ordering key only when given, the idempotency key always. */
function wireEvent(e: NotifyEvent, key: string): WireEvent {
  const ordering = e.orderingKey !== undefined ? { ordering_key: e.orderingKey } : {};
  return {
    topic: e.topic,
    data: e.data,
    ...(e.recipients !== undefined ? { recipients: e.recipients } : {}),
    idempotency_key: key,
    ...ordering,
  };
}

/** One event's JSON; data that JSON cannot carry is refused here, as the server would (nothing is sent). */
function serialiseEvent(e: NotifyEvent, key: string, path: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(wireEvent(e, key));
  } catch {
    // a cycle or a BigInt
  }
  if (text === undefined || e.data === undefined) {
    throw new AcwError(`${path}data: must be JSON-serialisable (null included, undefined not)`, {
      status: 400,
      code: 'invalid_input',
      details: { field: `${path}data` },
    });
  }
  return text;
}

export function createClient<T extends object = AnyTopics>(options: ClientOptions): AcwClient<T> {
  const { token, timeoutMs = 10_000, retries = 4 } = options;
  const doFetch = options.fetch ?? globalThis.fetch;
  const baseMs = options.backoff?.baseMs ?? 100;
  const capMs = options.backoff?.capMs ?? 2000;
  const maxRetryAfterMs = options.backoff?.maxRetryAfterMs ?? 60_000;
  // Checked here so a bad token fails at once, not as a fetch header error that would echo it.
  if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token)) {
    throw new TypeError('createClient: token must be a non-empty string of printable ASCII without spaces');
  }
  if (!Number.isInteger(retries) || retries < 0) throw new TypeError('createClient: retries must be a whole number >= 0');
  if (!(timeoutMs > 0)) throw new TypeError('createClient: timeoutMs must be > 0');
  const base = new URL(options.url);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError('createClient: url must be http:// or https://');
  const baseUrl = base.href.replace(/\/+$/, '');

  const redact = (s: string): string => s.split(token).join('[redacted]');
  const redactDeep = (v: unknown): unknown => {
    if (typeof v === 'string') return redact(v);
    if (Array.isArray(v)) return v.map(redactDeep);
    if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactDeep(x)]));
    return v;
  };

  function backoffMs(retry: number): number {
    return Math.random() * Math.min(capMs, baseMs * 2 ** retry);
  }

  /** The server's error body as an AcwError, falling back to the status line for non-JSON bodies. */
  function httpError(path: string, res: Response, text: string, attempts: number, wait: number | null): AcwError {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const err = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
    const code = typeof err?.code === 'string' ? err.code : `http_${res.status}`;
    const snippet = text.trim().slice(0, 200);
    const message =
      typeof err?.message === 'string' ? err.message : [res.statusText, snippet].filter(Boolean).join(': ') || 'no error body';
    return new AcwError(redact(`POST ${path} -> ${res.status} ${code}: ${message}`), {
      status: res.status,
      code,
      details: redactDeep(err?.details),
      attempts,
      ...(wait !== null ? { retryAfterMs: wait } : {}),
    });
  }

  /** POST `body` until it gets a final answer; the body (and so its idempotency keys) is the same on every attempt. */
  async function post(path: string, body: string, signal: AbortSignal | undefined): Promise<{ status: number; json: unknown }> {
    // The caller's active span as traceparent/tracestate: the notify continues its trace (docs/operations.md#tracing).
    const json = { 'content-type': 'application/json', accept: 'application/json' };
    const headers = { authorization: `Bearer ${token}`, ...json, ...(await activeCarrier()) };
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const timeout = AbortSignal.timeout(timeoutMs);
      const attemptSignal = signal ? AbortSignal.any([signal, timeout]) : timeout;
      let failure: AcwError;
      let wait: number | null = null;
      try {
        const res = await doFetch(baseUrl + path, {
          method: 'POST',
          headers,
          body,
          redirect: 'manual',
          signal: attemptSignal,
        });
        const text = await res.text();
        if (res.status >= 200 && res.status < 300) {
          try {
            return { status: res.status, json: JSON.parse(text) as unknown };
          } catch {
            throw new AcwError(redact(`POST ${path} -> ${res.status}: the response is not JSON`), {
              status: res.status,
              code: 'bad_response',
              attempts: attempt,
            });
          }
        }
        wait = retryAfterMs(res.headers.get('retry-after'));
        failure = httpError(path, res, text, attempt, wait);
        if (!isRetryableStatus(res.status) || (wait !== null && wait > maxRetryAfterMs)) throw failure;
      } catch (e) {
        if (e instanceof AcwError) throw e;
        if (signal?.aborted) throw signal.reason;
        const timedOut = timeout.aborted;
        const what = describe(e);
        // The cause is kept for debugging unless it would carry the token along.
        const cause = what.includes(token) ? undefined : e;
        failure = new AcwError(
          timedOut ? `POST ${path}: no answer within ${timeoutMs} ms` : `POST ${path}: network error: ${redact(what)}`,
          { status: 0, code: timedOut ? 'timeout' : 'network_error', attempts: attempt, cause },
        );
      }
      if (attempt > retries) throw failure;
      await sleep(wait ?? backoffMs(attempt - 1), signal);
    }
  }

  return {
    async notify(topic, data, opts = {}) {
      const key = opts.idempotencyKey ?? randomUUID();
      const event = { topic, data, ...(opts.recipients !== undefined ? { recipients: opts.recipients } : {}) };
      if (opts.orderingKey !== undefined) Object.assign(event, { orderingKey: opts.orderingKey });
      const body = serialiseEvent(event, key, '');
      const { status, json } = await post('/v1/notify', body, opts.signal);
      const result = toResult(json, status, isRecord(json) ? json.warning : undefined);
      if (!result) throw new AcwError(`POST /v1/notify -> ${status}: unexpected response body`, { status, code: 'bad_response' });
      return result;
    },

    async notifyBatch(events, opts = {}) {
      if (events.length === 0) return [];
      // Each event's key is fixed here, once, so a retried request is a replay rather than a duplicate.
      // Every event is serialised before the first request: data that cannot be sent refuses the call whole.
      const parts = events.map((e, i) => serialiseEvent(e, e.idempotencyKey ?? randomUUID(), `events[${i}].`));
      // One request at a time, in order: what is committed is always a prefix of the list (simple to
      // report and resume), and one call holds at most one batch transaction on the server.
      const all: NotifyResult[] = [];
      for (let start = 0; start < parts.length; start += MAX_BATCH_EVENTS) {
        const end = Math.min(start + MAX_BATCH_EVENTS, parts.length);
        try {
          all.push(...(await postBatch(parts.slice(start, end), opts.signal)));
        } catch (e) {
          // An abort is thrown as its reason, as documented; what committed is then found by calling again.
          if (!(e instanceof AcwError)) throw e;
          throw batchFailure(e, start, { results: all, failed: { start, end }, notSent: { start: end, end: parts.length } });
        }
      }
      return all;
    },
  };

  async function postBatch(parts: string[], signal: AbortSignal | undefined): Promise<NotifyResult[]> {
    const { status, json } = await post('/v1/notify/batch', `{"events":[${parts.join(',')}]}`, signal);
    const raw = isRecord(json) && Array.isArray(json.results) ? json.results : null;
    const results = raw?.map((r) => toResult(r, status, isRecord(json) ? json.warning : undefined));
    if (!results || results.length !== parts.length || results.some((r) => r === null)) {
      throw new AcwError(`POST /v1/notify/batch -> ${status}: unexpected response body`, { status, code: 'bad_response' });
    }
    return results as NotifyResult[];
  }
}
