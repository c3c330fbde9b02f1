import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { ApiError } from '../errors.js';
import { handoverTransaction, type Handover } from '../queue/handover.js';
import { fanOutPlanner, writeFanOut, type FanOutContext, type FanOutResult, type EventRow } from './fan-out.js';
import { canonicalJson } from './canonical-json.js';
import type { NotifyInput } from './input.js';

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
 * Write events at once, dispatched, in a fixed number of statements whatever their number: the
 * recipients check (when any are named), one insert of the events with their answers, one lookup
 * when some keys were taken, the jobs and the in-app notifications. Ids are made here, so each
 * answer is known before the insert and goes in with its event. In a `batch`, field names are
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
  let keyed = false;
  const items = inputs.map((input, i) => {
    const p = plan({ id: randomUUID(), topic: input.topic });
    if (input.idempotency_key !== undefined) keyed = true;
    return { i, input, hash: requestHash(input), result: p.result, endpoints: p.endpoints };
  });
  // Rows go in key order (keyless last): two requests sharing keys take their locks in the same
  // order and cannot deadlock. The sort is stable, so of a key given twice the first is written and
  // the later one meets it as a replay or a conflict, as if it came in a later request.
  const order = keyed ? items.toSorted((a, b) => keyOrder(a.input.idempotency_key, b.input.idempotency_key)) : items;
  // Without any key nothing can conflict (keyless rows never match in the unique index), so such a
  // batch goes without ON CONFLICT and the speculative insertion it costs every row. created_at
  // comes back as whole epoch milliseconds, what the body's occurred_at keeps: cheaper than a Date.
  const ins = await client.query<{ id: string; created_ms: number }>({
    name: keyed ? 'acw_notify_insert' : 'acw_notify_insert_keyless',
    text: `insert into events (id, topic, data, recipients, principal, idempotency_key, request_hash, response, dispatched_at)
      select t.id, t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), $2, t.idempotency_key, t.request_hash, t.response, now()
      from rows from (jsonb_to_recordset($1::jsonb)
          as (id uuid, topic text, data jsonb, recipients text[], idempotency_key text, request_hash text, response jsonb))
        with ordinality as t(id, topic, data, recipients, idempotency_key, request_hash, response, n)
      order by t.n
      ${keyed ? 'on conflict (principal, idempotency_key) do nothing' : ''}
      returning id, floor(extract(epoch from created_at) * 1000)::float8 as created_ms`,
    values: [
      JSON.stringify(
        order.map((it) => ({
          id: it.result.event_id,
          topic: it.input.topic,
          data: it.input.data,
          recipients: it.input.recipients ?? [],
          idempotency_key: it.input.idempotency_key ?? null,
          request_hash: it.hash,
          response: it.result,
        })),
      ),
      principal,
    ],
  });
  const createdMs = new Map<string, number>();
  for (const r of ins.rows) createdMs.set(r.id, r.created_ms);

  const answers: NotifyAnswer[] = [];
  const taken = ins.rows.length === items.length ? [] : items.filter((it) => !createdMs.has(it.result.event_id));
  if (taken.length > 0) {
    // A separate statement: under read committed it sees the events that hold these keys, committed
    // by a concurrent request while our insert waited for it, or written by this one.
    const prev = await client.query<{ idempotency_key: string; request_hash: string | null; response: FanOutResult | null }>({
      name: 'acw_notify_taken',
      text: `select idempotency_key, request_hash, response from events where principal = $1 and idempotency_key = any($2::text[])`,
      values: [principal, taken.map((it) => it.input.idempotency_key)],
    });
    const byKey = new Map(prev.rows.map((r) => [r.idempotency_key, r]));
    const conflicts: string[] = [];
    for (const it of taken) {
      const p = byKey.get(it.input.idempotency_key!);
      if (!p || p.request_hash !== it.hash || !p.response) conflicts.push(`${path(it.i)}idempotency_key`);
      else answers[it.i] = { status: 200, body: p.response };
    }
    if (conflicts.length > 0) {
      throw new ApiError(409, 'idempotency_conflict', `${conflicts[0]}: already used with a different request${more(conflicts.length)}`, {
        field: conflicts[0],
        // A batch names every conflicting event, so a client can tell which keys to change.
        ...(batch ? { fields: conflicts } : {}),
      });
    }
  }

  const written = taken.length === 0 ? items : items.filter((it) => createdMs.has(it.result.event_id));
  const events: EventRow[] = written.map((it) => ({
    id: it.result.event_id,
    topic: it.input.topic,
    data: it.input.data,
    recipients: it.input.recipients ?? [],
    created_at: new Date(createdMs.get(it.result.event_id)!),
  }));
  const results = await writeFanOut(client, events, written, ctx, { handover, marked: true });
  const gone = written.find((it) => it.result.unknown_recipients !== undefined);
  if (gone) {
    // Revoked between our check and the notifications insert: refused as if it had come first.
    const field = `${path(gone.i)}recipients`;
    throw new ApiError(400, 'unknown_recipients', `${field}: no such user: ${gone.result.unknown_recipients!.join(', ')}`, {
      field,
      names: gone.result.unknown_recipients,
    });
  }
  written.forEach((it, k) => (answers[it.i] = { status: 202, body: results[k]! }));
  return answers;
}

/** Deadlock and serialization failures are the database asking for the transaction again. */
async function retryingTransaction<T>(
  pool: pg.Pool,
  ctx: FanOutContext,
  fn: (client: pg.PoolClient, h: Handover) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await handoverTransaction(pool, ctx.adopter?.() ?? null, fn);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 3 || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}

/** The service's own notify (HTTP route, CLI): insert and fan out at once, in one transaction. */
export async function notifyNow(pool: pg.Pool, input: NotifyInput, principal: string, ctx: FanOutContext): Promise<NotifyAnswer> {
  const [answer] = await retryingTransaction(pool, ctx, (client, h) => notifyEvents(client, [input], principal, ctx, false, h));
  return answer!;
}

/** All or nothing: every event of the batch, or none of them. */
export async function notifyBatchNow(
  pool: pg.Pool,
  inputs: readonly NotifyInput[],
  principal: string,
  ctx: FanOutContext,
): Promise<NotifyAnswer[]> {
  return retryingTransaction(pool, ctx, (client, h) => notifyEvents(client, inputs, principal, ctx, true, h));
}
