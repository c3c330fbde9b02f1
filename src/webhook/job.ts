import { createHash, hash } from 'node:crypto';
import type { JobEvent } from '../queue/types.js';
import { jsonbText } from './jsonb-text.js';

/**
 * What a webhook delivery is as a job: its type, what it carries, how its id is made and the body
 * it sends. Owned here so that the fan-out (src/notify) depends on webhook, never the reverse.
 */

export const WEBHOOK_JOB = 'webhook.deliver';

/**
 * What the `webhook.deliver` job carries. The body is fixed by the event, so every retry sends the
 * same bytes: a job of an event (`event_id`) carries no body and sends `eventBody` of its event,
 * read with its claim (docs/architecture.md#bodies-by-reference); a job without one (an alert
 * sink's) and a job written before migration 0018 carry their body.
 */
export interface DeliverPayload {
  topic: string;
  body?: string;
  /** The producer's trace context (docs/operations.md#tracing): the attempt's span links to it. */
  traceparent?: string;
  tracestate?: string;
  /** The topic's schema version the data was validated against: the X-ACW-Schema-Version header. */
  schema_version?: number;
}

export function isDeliverPayload(p: unknown): p is DeliverPayload {
  if (typeof p !== 'object' || p === null) return false;
  const { topic, body } = p as DeliverPayload;
  return typeof topic === 'string' && (body === undefined || typeof body === 'string');
}

/**
 * An event as a claim of its jobs would read it (JobEvent), made in memory from its data and
 * created_at: for the jobs the notify hands to this process's pool without a claim, which must send
 * the bytes their retries, made from the stored event, will send.
 */
export function jobEventOf(data: unknown, createdAt: Date): JobEvent {
  return { dataJson: jsonbText(data), occurredAt: createdAt.toISOString() };
}

/** The body a job of this event sends when its payload carries none: the same bytes at every attempt. */
export function eventBody(eventId: string, topic: string, ev: JobEvent): string {
  const [before, after] = bodyAround({ id: eventId, topic }, ev.dataJson);
  return `${before}${ev.occurredAt}${after}`;
}

/** The namespace hashed into webhook job ids. Never change it: see webhookJobId. */
const JOB_ID_NAMESPACE = '5b0f0c3e-8a9d-4c1e-9f3a-6d2b7e41c0a8';
const NAMESPACE_BYTES = Buffer.from(JOB_ID_NAMESPACE.replaceAll('-', ''), 'hex');

/** Namespace, event id and endpoint name, written here for one-shot hashing (synchronous use only). */
const SCRATCH = Buffer.alloc(1024);
NAMESPACE_BYTES.copy(SCRATCH);

/**
 * SHA-1 of the namespace bytes, then `<event id>\n<endpoint>` in UTF-8. One-shot (`crypto.hash`) over a
 * reused buffer: half the CPU of a Hash object, on the batch notify's path once per job.
 */
function jobIdHash(eventId: string, endpoint: string): Buffer {
  const text = `${eventId}\n${endpoint}`;
  // At most 3 bytes per UTF-16 unit: a name too long for the scratch takes the general way.
  if (text.length * 3 > SCRATCH.length - NAMESPACE_BYTES.length) {
    return createHash('sha1').update(NAMESPACE_BYTES).update(text, 'utf8').digest();
  }
  const n = NAMESPACE_BYTES.length + SCRATCH.write(text, NAMESPACE_BYTES.length, 'utf8');
  return hash('sha1', SCRATCH.subarray(0, n), 'buffer');
}

function uuidText(b: Buffer): string {
  const x = b.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * The id of the `webhook.deliver` job of one event for one endpoint, a function of the two: fanning
 * the same event out again (after a database crash lost an asynchronous commit) makes the same
 * jobs, and a receiver sees the same `X-ACW-Event-Id` on a repeated delivery. A changed derivation
 * would give such a redelivery a new id that receivers could not deduplicate.
 *
 * For an event with a version 7 id (every event since the history layout) it is an RFC 9562
 * version 8 UUID: the event's 48 bits of Unix milliseconds first, then the SHA-1 of namespace,
 * event and endpoint, so job ids arrive in time order and are written at the right edge of the
 * indexes that hold them. For an older event id, the version 5 UUID of the same hash
 * (webhookJobIdV5), which is what its jobs were given.
 */
export function webhookJobId(eventId: string, endpoint: string): string {
  // On node:crypto directly: one per job on the batch notify path.
  const h = jobIdHash(eventId, endpoint);
  if (eventId.charCodeAt(14) !== 55 /* '7' */) return v5(h);
  const x = eventId.replaceAll('-', '');
  h.write(x.slice(0, 12), 0, 'hex');
  h[6] = (h[6]! & 0x0f) | 0x80;
  h[8] = (h[8]! & 0x3f) | 0x80;
  return uuidText(h);
}

/** The version 5 id that versions before the history layout gave every webhook job (replay looks for both). */
export function webhookJobIdV5(eventId: string, endpoint: string): string {
  return v5(jobIdHash(eventId, endpoint));
}

function v5(h: Buffer): string {
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  return uuidText(h);
}

export interface WebhookEvent {
  id: string;
  topic: string;
  occurredAt: Date | string;
  data: unknown;
}

/**
 * The delivery body `{"event_id","topic","occurred_at","data"}`, in that order, of a job that carries
 * it (see DeliverPayload): the data as JSON.stringify writes it.
 */
export function buildBody(event: WebhookEvent): string {
  // JSON.stringify drops undefined members; the body always carries `data`.
  return buildBodyWithData(event, JSON.stringify(event.data === undefined ? null : event.data));
}

/** A body in two parts, before and after the text of `occurred_at`. */
export function bodyAround(event: Omit<WebhookEvent, 'data' | 'occurredAt'>, dataJson: string): [string, string] {
  return [`{"event_id":${JSON.stringify(event.id)},"topic":${JSON.stringify(event.topic)},"occurred_at":"`, `","data":${dataJson}}`];
}

/** buildBody with the data already serialised by JSON.stringify. */
function buildBodyWithData(event: Omit<WebhookEvent, 'data'>, dataJson: string): string {
  const occurredAt = event.occurredAt instanceof Date ? event.occurredAt : new Date(event.occurredAt);
  if (Number.isNaN(occurredAt.getTime())) throw new RangeError('occurredAt is not a valid date');
  const [before, after] = bodyAround(event, dataJson);
  return `${before}${occurredAt.toISOString()}${after}`;
}
