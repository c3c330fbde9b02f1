// The events of one notify as the statements that write them take them: one JSON document of rows
// for the events insert (src/notify/notify.ts), and the rows the fan-out reads.
import { copyField, copyTextArray, timestampField } from '../db/copy.js';
import type { TraceCarrier } from '../tracing/carrier.js';
import type { EventRow, FanOutPlan } from './fan-out.js';
import type { NotifyInput } from './input.js';

/** One event on its way in: its place in the request, its data as JSON text, its answer and endpoints. */
export interface Item extends FanOutPlan {
  i: number;
  input: NotifyInput;
  data: string;
  hash: string | null;
  /** The producer span's context, stored with the event and copied into its jobs (docs/operations.md#tracing). */
  trace: TraceCarrier | undefined;
}

/** The rows of the events document (eventsDocument), in its order (`n`, 1-based). */
const DOCUMENT = `rows from (jsonb_to_recordset($1::jsonb)
      as (id uuid, topic text, data jsonb, recipients text[], idempotency_key text, request_hash text, response jsonb,
          traceparent text, tracestate text, schema_version int, ordering_key text))
    with ordinality as t(id, topic, data, recipients, idempotency_key, request_hash, response, traceparent, tracestate, schema_version, ordering_key, n)`;

/** The events insert of keyless events, from one json document of rows (eventsDocument); created_at is now(). */
export const INSERT_EVENTS = `insert into event_log (id, topic, data, recipients, principal, idempotency_key, dispatched_at, traceparent, tracestate, schema_version, ordering_key)
  select t.id, t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), $2, t.idempotency_key, now(), t.traceparent, t.tracestate, t.schema_version, t.ordering_key
  from ${DOCUMENT}
  order by t.n`;

/**
 * The keys claimed (acw_claim_keys, migration 0012: a lock per key until commit, then a lookup
 * over every day of keys kept) and the events whose key was free written, in one statement.
 * Answers the positions whose key another event holds, with that event's request hash and answer.
 */
export const INSERT_KEYED = `with t as materialized (select * from ${DOCUMENT}),
  k as materialized (
    select * from acw_claim_keys($2, (select array_agg(idempotency_key order by n) from t), (select array_agg(id order by n) from t),
                                 (select array_agg(request_hash order by n) from t), (select array_agg(response order by n) from t))),
  ins as (
    insert into event_log (id, topic, data, recipients, principal, idempotency_key, dispatched_at, traceparent, tracestate, schema_version, ordering_key)
    select t.id, t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), $2, t.idempotency_key, now(), t.traceparent, t.tracestate, t.schema_version, t.ordering_key
    from t where t.idempotency_key is null or exists (select 1 from k where k.n = t.n and k.fresh)
    order by t.n)
  select k.n, k.request_hash, k.response from k where not k.fresh order by k.n`;

/**
 * The rows of INSERT_EVENTS and INSERT_KEYED as one JSON array, the data spliced in as the text
 * its validation made. Only a keyed event carries its answer (`response`), kept with its key: only
 * a request with its key is ever answered from it.
 */
export function eventsDocument(items: readonly Item[]): string {
  const rows = items.map((it) => {
    const { input } = it;
    let row = `{"id":"${it.result.event_id}","topic":${JSON.stringify(input.topic)},"data":${it.data}`;
    if (input.recipients !== undefined) row += `,"recipients":${JSON.stringify(input.recipients)}`;
    if (it.result.schema_version !== undefined) row += `,"schema_version":${it.result.schema_version}`;
    if (input.ordering_key !== undefined) row += `,"ordering_key":${JSON.stringify(input.ordering_key)}`;
    if (input.idempotency_key !== undefined)
      row += `,"idempotency_key":${JSON.stringify(input.idempotency_key)},"request_hash":"${it.hash}","response":${JSON.stringify(it.result)}`;
    if (it.trace)
      row += `,"traceparent":"${it.trace.traceparent}"${it.trace.tracestate ? `,"tracestate":${JSON.stringify(it.trace.tracestate)}` : ''}`;
    return `${row}}`;
  });
  return `[${rows.join(',')}]`;
}

/** The events of INSERT_EVENTS by COPY (src/db/copy.ts): many keyless events at once. */
export const COPY_EVENTS = `copy event_log (id, topic, data, recipients, principal, dispatched_at, traceparent, tracestate, schema_version, ordering_key) from stdin`;

/**
 * The rows of COPY_EVENTS in COPY's text format: what INSERT_EVENTS writes of the same items, with
 * `dispatched_at` the transaction's now() to the microsecond, as INSERT_EVENTS sets it (`nowMs` from
 * withTransaction's `readNow`). Keyless events only: keys are claimed by INSERT_KEYED.
 */
export function eventsCopy(items: readonly Item[], principal: string, nowMs: number): string {
  const tail = `\t${copyField(principal)}\t${timestampField(nowMs)}\t`;
  let text = '';
  for (const it of items) {
    const { input, trace } = it;
    const recipients = input.recipients === undefined ? '{}' : copyTextArray(input.recipients);
    const version = it.result.schema_version === undefined ? '\\N' : String(it.result.schema_version);
    text += `${it.result.event_id}\t${copyField(input.topic)}\t${copyField(it.data)}\t${recipients}${tail}${copyField(trace?.traceparent)}\t${copyField(trace?.tracestate)}\t${version}\t${copyField(input.ordering_key)}\n`;
  }
  return text;
}

export function eventRows(items: readonly Item[], createdAt: Date): EventRow[] {
  return items.map((it) => ({
    id: it.result.event_id,
    topic: it.input.topic,
    data: it.input.data,
    recipients: it.input.recipients ?? [],
    created_at: createdAt,
    ...(it.trace ? { trace: it.trace } : {}),
    schema_version: it.result.schema_version,
    ordering_key: it.input.ordering_key ?? null,
  }));
}
