import { createHash } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import type pg from 'pg';
import { COPY_MIN_ROWS, copyRows } from '../db/copy.js';
import { ApiError } from '../errors.js';
import { handoverTransaction, type Handover } from '../queue/handover.js';
import { insertWithJobs } from '../queue/transitions.js';
import { WEBHOOK_JOB } from '../webhook/job.js';
import { canonicalJson } from './canonical-json.js';
import { newEventId } from './event-id.js';
import { fanOutPlanner, writeFanOut, type FanOutContext, type FanOutResult } from './fan-out.js';
import { COPY_EVENTS, INSERT_EVENTS, INSERT_KEYED, eventRows, eventsCopy, eventsDocument, type Item } from './event-document.js';
import { dataJson, type NotifyInput } from './input.js';
import type { TraceCarrier } from '../tracing/carrier.js';
import { tracing } from '../tracing/runtime.js';
import { checkEvents, type TopicCheck } from '../topics/check.js';

export interface NotifyAnswer {
  /** 202 accepted now; 200 the same idempotency key again: the first answer, nothing written. */
  status: 200 | 202;
  body: FanOutResult;
}

/**
 * What a later request with the same idempotency key is compared with. Only a keyed event can meet
 * one: a keyless event stores no hash, which spares the canonical JSON and the SHA-256 of its data.
 */
function requestHash(input: NotifyInput): string | null {
  if (input.idempotency_key === undefined) return null;
  return createHash('sha256')
    .update(canonicalJson([input.topic, input.data, input.recipients ?? []]))
    .digest('hex');
}

/** Bytewise, as PostgreSQL's `collate "C"` orders; keyless events last. */
function keyOrder(a: string | undefined, b: string | undefined): number {
  if (a === b) return 0;
  if (a === undefined) return 1;
  if (b === undefined) return -1;
  return a < b ? -1 : 1;
}

/** "(and 3 more)" after the first of several problems, as input validation words it. */
const more = (n: number): string => (n > 1 ? ` (and ${n - 1} more)` : '');

/**
 * Write events at once, dispatched, in a bounded number of statements whatever their number: the
 * recipients check (when any are named), one statement that claims the keys and inserts the
 * events whose key was free (answering the taken ones), the jobs and the inbox messages; keyless
 * events in up to KEYLESS_PARTS parts of those (writeKeyless). Ids are made here and `nowMs` is the
 * transaction's now() (every row's created_at), so each answer and each delivery body is known
 * before the insert. In a `batch`, field names are
 * prefixed with the event's place (`events[3].recipients`). Throws an ApiError, having written
 * nothing that the caller's rollback does not undo, on an unknown recipient or a key used with a
 * different request.
 */
async function notifyEvents(
  client: pg.ClientBase,
  inputs: readonly NotifyInput[],
  principal: string,
  ctx: FanOutContext,
  batch: boolean,
  handover: Handover,
  nowMs: number,
  traces: readonly (TraceCarrier | undefined)[] | undefined,
  checks: readonly TopicCheck[],
): Promise<NotifyAnswer[]> {
  const path = (i: number): string => (batch ? `events[${i}].` : '');
  const named = inputs.flatMap((input, i) => (input.recipients ?? []).map((name) => ({ i, name })));
  if (named.length > 0) {
    const res = await client.query<{ i: number; names: string[] }>({
      name: 'acw_notify_unknown_recipients',
      text: `select t.i, array_agg(t.name order by t.k) as names
        from unnest($1::int[], $2::text[]) with ordinality as t(i, name, k)
        where not exists (select 1 from users u where u.name = t.name and u.revoked_at is null)
        group by t.i order by t.i`,
      values: [named.map((n) => n.i), named.map((n) => n.name)],
    });
    const first = res.rows[0];
    if (first) {
      const field = `${path(first.i)}recipients`;
      throw new ApiError(400, 'unknown_recipients', `${field}: no such user: ${first.names.join(', ')}${more(res.rows.length)}`, {
        field,
        names: first.names,
      });
    }
  }

  const plan = fanOutPlanner(ctx);
  const item = (i: number): Item => {
    const input = inputs[i]!;
    const p = plan({ id: newEventId(), topic: input.topic });
    Object.assign(p.result, checks[i]);
    return { i, input, data: dataJson(input.data), hash: requestHash(input), result: p.result, endpoints: p.endpoints, trace: traces?.[i] };
  };
  // Every event of this transaction gets its now() as created_at, so the bodies can be made before
  // the rows go in.
  if (!inputs.some((input) => input.idempotency_key !== undefined))
    return writeKeyless(client, inputs, item, principal, ctx, nowMs, path, handover);
  const items = inputs.map((_, i) => item(i));
  const createdAt = new Date(nowMs);

  // Rows go in key order (keyless last): the keys' locks are taken in that order (acw_claim_keys),
  // so two requests sharing keys cannot deadlock. The sort is stable, so of a key given twice the
  // first is written and the later one meets it as a replay or a conflict, as if it came in a later
  // request.
  const order = items.toSorted((a, b) => keyOrder(a.input.idempotency_key, b.input.idempotency_key));
  const ins = await client.query<{ n: number; request_hash: string | null; response: FanOutResult | null }>({
    name: 'acw_notify_insert',
    text: INSERT_KEYED,
    values: [eventsDocument(order), principal],
  });
  const answers: NotifyAnswer[] = [];
  // The positions (1-based, in `order`) whose key another event holds: a replay or a conflict.
  const taken = ins.rows.map((r) => ({ it: order[r.n - 1]!, held: r })).toSorted((a, b) => a.it.i - b.it.i);
  if (taken.length > 0) {
    const conflicts: string[] = [];
    for (const { it, held } of taken) {
      if (held.request_hash !== it.hash || !held.response) conflicts.push(`${path(it.i)}idempotency_key`);
      else answers[it.i] = { status: 200, body: held.response };
    }
    if (conflicts.length > 0) {
      throw new ApiError(409, 'idempotency_conflict', `${conflicts[0]}: already used with a different request${more(conflicts.length)}`, {
        field: conflicts[0],
        // A batch names every conflicting event, so a client can tell which keys to change.
        ...(batch ? { fields: conflicts } : {}),
      });
    }
  }
  const heldIds = new Set(taken.map((t) => t.it.result.event_id));

  const written = taken.length === 0 ? items : items.filter((it) => !heldIds.has(it.result.event_id));
  const results = await writeFanOut(client, eventRows(written, createdAt), written, ctx, { handover, marked: true });
  refuseGoneRecipients(written, path);
  written.forEach((it, k) => (answers[it.i] = { status: 202, body: results[k]! }));
  return answers;
}

/** A recipient revoked between our check and the notifications insert: refused as if it had come first. */
function refuseGoneRecipients(written: readonly Item[], path: (i: number) => string): void {
  const gone = written.find((it) => it.result.unknown_recipients !== undefined);
  if (!gone) return;
  const field = `${path(gone.i)}recipients`;
  throw new ApiError(400, 'unknown_recipients', `${field}: no such user: ${gone.result.unknown_recipients!.join(', ')}`, {
    field,
    names: gone.result.unknown_recipients,
  });
}

/** Keyless events are written in at most this many parts, so the statements per request stay bounded. */
const KEYLESS_PARTS = 4;
/** ...and each part has at least this many events: a small request goes in one. */
const KEYLESS_MIN_PART = 100;

/**
 * Events without idempotency keys meet no replay and no conflict, so every row goes in without a
 * look at what came back. The statements of each part (its events, then its jobs; by COPY from
 * fifty events on, src/db/copy.ts) follow each other on the connection, each sent as the one before
 * it finishes, and the next part (its ids, answers and rows) is prepared while PostgreSQL writes
 * this one: the process's CPU and the database's overlap instead of taking turns. At most
 * KEYLESS_PARTS parts. The first failure (in time) is thrown once every statement has settled,
 * nothing being sent after it; the caller's rollback undoes the parts that went in.
 */
async function writeKeyless(
  client: pg.ClientBase,
  inputs: readonly NotifyInput[],
  item: (i: number) => Item,
  principal: string,
  ctx: FanOutContext,
  nowMs: number,
  path: (i: number) => string,
  handover: Handover,
): Promise<NotifyAnswer[]> {
  const createdAt = new Date(nowMs);
  // Keyed events in one part: their keys' rows are then locked in one statement, in one order.
  const ordered = inputs.some((input) => input.ordering_key !== undefined);
  const parts = ordered ? 1 : Math.min(KEYLESS_PARTS, Math.ceil(inputs.length / KEYLESS_MIN_PART));
  const size = Math.ceil(inputs.length / parts);
  const items: Item[] = [];
  const queued: Array<Promise<unknown>> = [];
  let failure: { err: unknown } | undefined;
  const track = <T>(p: Promise<T>): Promise<T> => {
    p.catch((err: unknown) => (failure ??= { err }));
    queued.push(p);
    return p;
  };
  const answered: Array<Promise<FanOutResult[]>> = [];
  let last: Promise<unknown> = Promise.resolve();
  for (let start = 0; start < inputs.length; start += size) {
    // A failed statement aborts the transaction: nothing more is sent after it.
    if (failure !== undefined) break;
    // Each part's ids and answers are made as it goes: the first part's rows go out sooner. Should
    // that throw, what is queued already settles before the error goes up, as for a statement's.
    let part: Item[];
    let write: () => Promise<unknown>;
    try {
      part = [];
      for (let i = start; i < Math.min(inputs.length, start + size); i++) part.push(item(i));
      if (part.length >= COPY_MIN_ROWS) {
        const text = eventsCopy(part, principal, nowMs);
        write = () => copyRows(client, COPY_EVENTS, text);
      } else {
        const values = [eventsDocument(part), principal];
        write = () => client.query({ name: 'acw_notify_insert_keyless', text: INSERT_EVENTS, values });
      }
    } catch (err) {
      failure ??= { err };
      break;
    }
    items.push(...part);
    // Each statement goes when the one before it has finished (pg's own queue would send it then
    // too, but pg 9 drops that queue), and none after a failure.
    const rows = track(last.then(write));
    const jobs = track(writeFanOut(client, eventRows(part, createdAt), part, ctx, { handover, marked: true, after: rows }));
    answered.push(jobs);
    last = jobs;
    // Let this part's statements go out before this process builds more.
    if (start + size < inputs.length) await setImmediate();
  }
  await Promise.allSettled(queued);
  if (failure !== undefined) throw failure.err;
  const results = (await Promise.all(answered)).flat();
  refuseGoneRecipients(items, path);
  return results.map((body) => ({ status: 202, body }));
}

/**
 * An event without recipients, in a process with no worker pool to hand its jobs to (an API-only
 * `serve`): its row, its jobs and the NOTIFY in one statement in autocommit, one round trip where
 * a transaction takes four (begin, two inserts, commit). The answer is known before the insert, as
 * on the general path, and a keyed event stores it with its key. A key that is taken writes nothing
 * here and answers null: the caller's transaction then finds the event holding it (a replay or a
 * conflict), as for any repeated key. Such a claim waits, as the general path's does, for a
 * concurrent request holding the same key to commit or roll back (acw_claim_keys' lock per key).
 */
async function notifyOne(
  pool: pg.Pool,
  input: NotifyInput,
  principal: string,
  ctx: FanOutContext,
  trace: TraceCarrier | undefined,
  check: TopicCheck,
): Promise<NotifyAnswer | null> {
  const id = newEventId();
  const { result, endpoints } = fanOutPlanner(ctx)({ id, topic: input.topic });
  Object.assign(result, check);
  const version = check.schema_version ?? null;
  const data = dataJson(input.data);
  const key = input.idempotency_key;
  const first =
    key === undefined
      ? {
          text: `insert into event_log (id, topic, data, principal, dispatched_at, traceparent, tracestate, schema_version)
            values ($1, $2, $3::jsonb, $4, now(), $5, $6, $7) returning id`,
          values: [id, input.topic, data, principal, trace?.traceparent ?? null, trace?.tracestate ?? null, version],
        }
      : {
          text: `insert into event_log (id, topic, data, principal, idempotency_key, dispatched_at, traceparent, tracestate, schema_version)
            select $1, $2, $3::jsonb, $4, $5, now(), $8, $9, $10
            where (select c.fresh from acw_claim_keys($4, array[$5]::text[], array[$1]::uuid[], array[$6]::text[], array[$7::jsonb]) c)
            returning id`,
          values: [
            id,
            input.topic,
            data,
            principal,
            key,
            requestHash(input),
            JSON.stringify(result),
            trace?.traceparent ?? null,
            trace?.tracestate ?? null,
            version,
          ],
        };
  const written = await insertWithJobs(
    pool,
    {
      name: key === undefined ? 'acw_notify_one' : 'acw_notify_one_keyed',
      first,
      ids: result.job_ids,
      endpoints,
      type: WEBHOOK_JOB,
      maxAttempts: ctx.maxAttempts,
      eventId: id,
      topic: input.topic,
      schemaVersion: version,
      ...(trace ? { trace } : {}),
    },
    ctx.jobsChannel,
  );
  if (!written) return null;
  if (endpoints.length === 0)
    ctx.log.info({ event: 'webhook.skipped', event_id: id, topic: input.topic, reason: result.skipped }, 'no webhook job for this event');
  else if (ctx.log.isLevelEnabled('debug'))
    for (const jobId of result.job_ids) ctx.log.debug({ event: 'job.enqueued', job_id: jobId, type: WEBHOOK_JOB }, 'job enqueued');
  return { status: 202, body: result };
}

/** Deadlock and serialization failures are the database asking for the transaction again. */
async function retryingTransaction<T>(
  pool: pg.Pool,
  ctx: FanOutContext,
  fn: (client: pg.PoolClient, h: Handover, nowMs: number) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await handoverTransaction(pool, ctx.adopter?.() ?? null, fn, { readNow: true });
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 3 || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}

/** The answer's event and the jobs it wrote, for the producer span (a replay wrote none). */
const written = (a: NotifyAnswer): { eventId: string; jobs: number } => ({
  eventId: a.body.event_id,
  jobs: a.status === 202 ? a.body.job_ids.length : 0,
});

/**
 * The service's own notify (HTTP route, CLI): insert and fan out at once, in one transaction.
 * With tracing on, inside a producer span whose context goes with the event and its jobs.
 */
export async function notifyNow(pool: pg.Pool, input: NotifyInput, principal: string, ctx: FanOutContext): Promise<NotifyAnswer> {
  const checks = checkTopics(ctx, [input], false);
  const t = tracing;
  if (t === null) return notifyTraced(pool, input, principal, ctx, undefined, checks);
  return t.produce({ topic: input.topic, events: 1 }, (trace) => notifyTraced(pool, input, principal, ctx, trace, checks), written);
}

async function notifyTraced(
  pool: pg.Pool,
  input: NotifyInput,
  principal: string,
  ctx: FanOutContext,
  trace: TraceCarrier | undefined,
  checks: readonly TopicCheck[],
): Promise<NotifyAnswer> {
  // Nothing to check first and no worker pool of our own to hand jobs to: one statement (see
  // notifyOne), unless its key is taken, which the transaction below answers.
  if (!input.recipients?.length && input.ordering_key === undefined && !ctx.adopter?.()) {
    const answer = await notifyOne(pool, input, principal, ctx, trace, checks[0]!);
    if (answer) return answer;
  }
  const [answer] = await retryingTransaction(pool, ctx, (client, h, nowMs) =>
    notifyEvents(client, [input], principal, ctx, false, h, nowMs, trace ? [trace] : undefined, checks),
  );
  return answer!;
}

/** All or nothing: every event of the batch, or none of them. */
export async function notifyBatchNow(
  pool: pg.Pool,
  inputs: readonly NotifyInput[],
  principal: string,
  ctx: FanOutContext,
): Promise<NotifyAnswer[]> {
  const checks = checkTopics(ctx, inputs, true);
  const run = (traces: readonly TraceCarrier[] | undefined) =>
    retryingTransaction(pool, ctx, (client, h, nowMs) => notifyEvents(client, inputs, principal, ctx, true, h, nowMs, traces, checks));
  const t = tracing;
  if (t === null) return run(undefined);
  // A producer span per event, children of the batch's: each event's attempts link to their own.
  return t.produceBatch(
    inputs.map((i) => i.topic),
    run,
    (answers) => answers.map(written),
  );
}

/** The topic catalog's check of every event, before anything is written (throws the 400 under enforce). */
function checkTopics(ctx: FanOutContext, inputs: readonly NotifyInput[], batch: boolean): TopicCheck[] {
  const view = ctx.topics?.();
  if (!view) return inputs.map(() => ({}));
  return checkEvents(view, inputs, batch, ctx.onSchemaMismatch);
}
