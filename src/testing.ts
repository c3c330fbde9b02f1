// An in-memory NotifyClient for service developers' unit tests (`acw-webhooks/testing`): no service,
// no network. It validates with the server's own input schema, so what it refuses the server refuses.
import {
  AcwError,
  batchFailure,
  MAX_BATCH_EVENTS,
  type NotifyClient,
  type NotifyEvent,
  type NotifyOptions,
  type NotifyResult,
} from './client.js';
import type { AnyTopics } from './topic-map.js';
import { canonicalJson } from './notify/canonical-json.js';
import { notifyInput } from './notify/input.js';

export { AcwError, type AnyTopics, type NotifyClient, type NotifyEvent, type NotifyResult } from './client.js';

/** One recorded event, as your code passed it (`data` as the server would receive it: a JSON copy). */
export interface RecordedCall {
  topic: string;
  data: unknown;
  recipients?: string[];
  idempotencyKey?: string;
}

export interface TestClientOptions {
  /** Job ids per accepted event, standing in for matching endpoints. 0 answers `skipped: 'no_matching_endpoint'`. Default 1. */
  jobsPerEvent?: number;
  /** When given, recipients not in this list are refused with a 400 `unknown_recipients`, as the server does. */
  users?: readonly string[];
}

/** With a `Topics` map as its type parameter (docs/integrate.md#typed-topics), checked as the real client is. */
export interface TestClient<T extends object = AnyTopics> extends NotifyClient<T> {
  /** Every event your code notified, in order (a batch adds one entry per event), refused ones included. */
  readonly calls: RecordedCall[];
  /** The most recent entry of `calls`. */
  lastCall(): RecordedCall | undefined;
  /** The entries of `calls` for one topic. */
  callsFor(topic: string): RecordedCall[];
  /** The next call rejects with this error (default: a 503 AcwError), to test your failure handling. */
  failNext(error?: Error): void;
  /** Forget calls, idempotency keys and pending failures; ids start again from 1. */
  clear(): void;
}

interface KeptAnswer {
  request: string;
  result: NotifyResult;
}

/** A refused event, as the server answers it: 413 for oversized data, else a 400 naming every bad field. */
function invalid(path: string, issues: ReadonlyArray<{ code: string; path: PropertyKey[]; message: string }>): AcwError {
  const named = issues.map((i) => ({ field: path + (i.path.map(String).join('.') || 'event'), message: i.message }));
  const tooBig = issues.findIndex((i) => i.code === 'too_big' && i.path.at(-1) === 'data');
  if (tooBig >= 0) {
    const { field, message } = named[tooBig]!;
    return new AcwError(`${field}: ${message}`, { status: 413, code: 'payload_too_large', details: { field } });
  }
  return new AcwError(named.map((i) => `${i.field}: ${i.message}`).join('; '), {
    status: 400,
    code: 'invalid_input',
    details: { field: named[0]?.field, issues: named },
  });
}

/** What the server would keep of `data`: a JSON copy (Dates become strings, undefined members vanish). */
function jsonCopy(v: unknown): unknown {
  try {
    const text = JSON.stringify(v);
    return text === undefined ? v : (JSON.parse(text) as unknown);
  } catch {
    return v;
  }
}

/** What the HTTP client refuses before sending (its serialiseEvent): data that JSON cannot carry. */
function unsendable(data: unknown, path: string): void {
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch {
    // a cycle or a BigInt
  }
  if (text === undefined || data === undefined) {
    throw new AcwError(`${path}data: must be JSON-serialisable (null included, undefined not)`, {
      status: 400,
      code: 'invalid_input',
      details: { field: `${path}data` },
    });
  }
}

export function createTestClient<T extends object = AnyTopics>(options: TestClientOptions = {}): TestClient<T> {
  const jobsPerEvent = options.jobsPerEvent ?? 1;
  const users = options.users ? new Set(options.users) : undefined;
  const calls: RecordedCall[] = [];
  let keys = new Map<string, KeptAnswer>();
  let counter = 0;
  let pendingFailure: Error | undefined;

  // Well-formed (version 4, RFC 4122 variant) and predictable: ...-000000000001, ...-000000000002.
  const nextId = (): string => `00000000-0000-4000-8000-${(++counter).toString(16).padStart(12, '0')}`;

  function record(e: NotifyEvent): void {
    calls.push({
      topic: e.topic,
      data: jsonCopy(e.data),
      ...(e.recipients !== undefined ? { recipients: [...e.recipients] } : {}),
      ...(e.idempotencyKey !== undefined ? { idempotencyKey: e.idempotencyKey } : {}),
    });
  }

  /** Validate and answer one event against `kept` (a working copy for batches: all or nothing). */
  function accept(e: NotifyEvent, path: string, kept: Map<string, KeptAnswer>, conflicts?: string[]): NotifyResult | null {
    const parsed = notifyInput.safeParse({
      topic: e.topic,
      data: e.data,
      ...(e.recipients !== undefined ? { recipients: e.recipients } : {}),
      ...(e.idempotencyKey !== undefined ? { idempotency_key: e.idempotencyKey } : {}),
    });
    if (!parsed.success) throw invalid(path, parsed.error.issues);
    const unknown = users ? (e.recipients ?? []).filter((n) => !users.has(n)) : [];
    if (unknown.length > 0) {
      throw new AcwError(`${path}recipients: no such user: ${unknown.join(', ')}`, {
        status: 400,
        code: 'unknown_recipients',
        details: { field: `${path}recipients`, names: unknown },
      });
    }
    // Hashed as the service hashes a request: the same data with its keys in another order is a replay.
    const request = canonicalJson([e.topic, e.data, e.recipients ?? []]);
    const key = e.idempotencyKey;
    const prev = key === undefined ? undefined : kept.get(key);
    if (prev) {
      if (prev.request !== request) {
        // In a batch every conflicting event is named, as the server does; the batch is refused after.
        if (conflicts) {
          conflicts.push(`${path}idempotency_key`);
          return null;
        }
        throw new AcwError(`${path}idempotency_key: already used with a different request`, {
          status: 409,
          code: 'idempotency_conflict',
          details: { field: `${path}idempotency_key` },
        });
      }
      return { ...prev.result, job_ids: [...prev.result.job_ids], replayed: true };
    }
    const result: NotifyResult = {
      event_id: nextId(),
      job_ids: Array.from({ length: jobsPerEvent }, nextId),
      ...(jobsPerEvent === 0 ? { skipped: 'no_matching_endpoint' } : {}),
      replayed: false,
    };
    if (key !== undefined) kept.set(key, { request, result: { ...result, job_ids: [...result.job_ids] } });
    return result;
  }

  function takeFailure(signal: AbortSignal | undefined): void {
    signal?.throwIfAborted();
    const failure = pendingFailure;
    pendingFailure = undefined;
    if (failure) throw failure;
  }

  return {
    calls,
    lastCall: () => calls.at(-1),
    callsFor: (topic) => calls.filter((c) => c.topic === topic),
    failNext(error) {
      pendingFailure =
        error ??
        new AcwError('POST /v1/notify -> 503 unavailable: injected by failNext()', { status: 503, code: 'unavailable', attempts: 1 });
    },
    clear() {
      calls.length = 0;
      keys = new Map();
      counter = 0;
      pendingFailure = undefined;
    },

    async notify(topic: string, data: unknown, opts: NotifyOptions = {}): Promise<NotifyResult> {
      const e: NotifyEvent = {
        topic,
        data,
        ...(opts.recipients !== undefined ? { recipients: opts.recipients } : {}),
        ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
      };
      record(e);
      takeFailure(opts.signal);
      return accept(e, '', keys)!;
    },

    async notifyBatch(events: readonly NotifyEvent[], opts: { signal?: AbortSignal } = {}): Promise<NotifyResult[]> {
      for (const e of events) record(e);
      takeFailure(opts.signal);
      if (events.length === 0) return [];
      // As the HTTP client does: the data of every event checked before anything is taken, then
      // MAX_BATCH_EVENTS at a time, each all or nothing, stopping at the first refusal.
      events.forEach((e, i) => unsendable(e.data, `events[${i}].`));
      const all: NotifyResult[] = [];
      for (let start = 0; start < events.length; start += MAX_BATCH_EVENTS) {
        const end = Math.min(start + MAX_BATCH_EVENTS, events.length);
        try {
          all.push(...acceptBatch(events.slice(start, end), start));
        } catch (err) {
          if (!(err instanceof AcwError)) throw err;
          // accept() named events from the start of the caller's list already: no offset to add.
          throw batchFailure(err, 0, { results: all, failed: { start, end }, notSent: { start: end, end: events.length } });
        }
      }
      return all;
    },
  };

  /** One request's worth of events, all or nothing; `offset` is where they start in the caller's list. */
  function acceptBatch(events: readonly NotifyEvent[], offset: number): NotifyResult[] {
    const working = new Map(keys);
    const counterBefore = counter;
    try {
      const conflicts: string[] = [];
      const results = events.map((e, i) => accept(e, `events[${offset + i}].`, working, conflicts));
      if (conflicts.length > 0) {
        const more = conflicts.length > 1 ? ` (and ${conflicts.length - 1} more)` : '';
        throw new AcwError(`${conflicts[0]}: already used with a different request${more}`, {
          status: 409,
          code: 'idempotency_conflict',
          details: { field: conflicts[0], fields: conflicts },
        });
      }
      keys = working;
      return results as NotifyResult[];
    } catch (err) {
      counter = counterBefore;
      throw err;
    }
  }
}
