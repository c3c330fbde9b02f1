import { quoteIdent } from './db/sql.js';
import { notifyInput, type NotifyInput } from './notify/input.js';
import type { AnyTopics } from './topic-map.js';
import { producing } from './tracing/active.js';

/**
 * The transactional outbox. Call it with the `pg` client your own transaction runs on: the event
 * exists if and only if your transaction commits, and the acw-webhooks dispatcher (woken by the
 * NOTIFY that goes out at commit) fans it out to webhook jobs and inbox messages (`GET /v1/notifications`).
 *
 *   await client.query('begin');
 *   await client.query('update workspaces set ...');
 *   await notify(client, 'workspace.sync_failed', { workspace_id: 42 });
 *   await client.query('commit');
 */

/** Anything with pg's `query(text, values)`: a `pg.Client`, a `PoolClient`, or a `Pool` (no transaction). */
export interface OutboxDb {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

export interface OutboxOptions {
  /** User names that get an inbox message of the event (`GET /v1/notifications`). Unknown names are skipped (and logged by the dispatcher). */
  recipients?: string[];
  /** The same key again returns the first event's id and writes nothing. */
  idempotencyKey?: string;
  /** Events with the same key reach each endpoint one at a time, in dispatch order (docs/operations.md#ordered-delivery). 1 to 256 bytes. */
  orderingKey?: string;
  /** The schema acw-webhooks is installed in (`database.schema`). Default `public`. */
  schema?: string;
}

export type { AnyTopics } from './topic-map.js';

export type OutboxEvent<T extends object = AnyTopics> = {
  [K in keyof T & string]: { topic: K; data: T[K]; recipients?: string[]; idempotencyKey?: string; orderingKey?: string };
}[keyof T & string];

/** notify()'s arguments after `db`: one tuple per topic, so the topic given picks the type of its data. */
export type NotifyArgs<T extends object = AnyTopics> = {
  [K in keyof T & string]: [topic: K, data: T[K], opts?: OutboxOptions];
}[keyof T & string];

export class OutboxError extends Error {
  override readonly name = 'OutboxError';
}

function validate(e: OutboxEvent & { schema?: string }, path: string): NotifyInput {
  const parsed = notifyInput.safeParse({
    topic: e.topic,
    data: e.data,
    ...(e.recipients ? { recipients: e.recipients } : {}),
    ...(e.idempotencyKey !== undefined ? { idempotency_key: e.idempotencyKey } : {}),
    ...(e.orderingKey !== undefined ? { ordering_key: e.orderingKey } : {}),
  });
  if (!parsed.success) {
    const msgs = parsed.error.issues.map((i) => `${path}${i.path.join('.') || 'event'}: ${i.message}`);
    throw new OutboxError(msgs.join('; '));
  }
  return parsed.data;
}

function schemaOf(schema: string | undefined): string {
  const s = schema ?? 'public';
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new OutboxError(`schema: expected a lowercase identifier, got ${JSON.stringify(s)}`);
  return quoteIdent(s);
}

/**
 * Record one event in the caller's transaction; resolves with its id. `notify<Topics>(db, topic,
 * data)` checks the topic and its data against a `Topics` map (docs/integrate.md#typed-topics).
 */
export async function notify<T extends object = AnyTopics>(db: OutboxDb, ...args: NotifyArgs<NoInfer<T>>): Promise<string> {
  const [topic, data, opts = {}] = args as [string, unknown, OutboxOptions?];
  const ev = validate({ topic, data, ...opts }, '');
  const schema = schemaOf(opts.schema);
  return producing({ topic: ev.topic, events: 1 }, async (trace) => {
    const values = [ev.topic, JSON.stringify(ev.data), ev.recipients ?? [], ev.idempotency_key ?? null];
    // Options (the ordering key, the trace context: docs/integrate.md, docs/operations.md#tracing)
    // go in the sixth argument, an object; without any, the call stays the four-argument one every
    // version of the function takes.
    const options = { ...(ev.ordering_key !== undefined ? { ordering_key: ev.ordering_key } : {}), ...trace };
    const res =
      Object.keys(options).length > 0
        ? await db.query(`select ${schema}.acw_notify($1, $2::jsonb, $3::text[], $4, p_options => $5::jsonb) as id`, [
            ...values,
            JSON.stringify(options),
          ])
        : await db.query(`select ${schema}.acw_notify($1, $2::jsonb, $3::text[], $4) as id`, values);
    return String(res.rows[0]?.id);
  });
}

/**
 * Record many events in one statement, in the caller's transaction; resolves with their ids in order.
 * One set-based insert and one NOTIFY for the whole batch (`acw_notify_many`, migration 0003), with the
 * same answers as `notify()` called for each event in turn: a key already taken, by an earlier event or
 * earlier in the same batch, answers with the event holding it and writes nothing.
 */
export async function notifyMany<T extends object = AnyTopics>(
  db: OutboxDb,
  events: readonly OutboxEvent<NoInfer<T>>[],
  opts: { schema?: string } = {},
): Promise<string[]> {
  if (events.length === 0) return [];
  const evs = events.map((e, i) => validate(e as OutboxEvent, `events[${i}].`));
  const schema = schemaOf(opts.schema);
  const topics = new Set(evs.map((e) => e.topic));
  const res = await producing({ ...(topics.size === 1 ? { topic: evs[0]!.topic } : {}), events: evs.length }, (trace) =>
    db.query(`select ${schema}.acw_notify_many($1::jsonb) as ids`, [JSON.stringify(trace ? evs.map((e) => ({ ...e, ...trace })) : evs)]),
  );
  const ids: unknown = res.rows[0]?.ids;
  if (!Array.isArray(ids) || ids.length !== evs.length) {
    throw new Error(`acw_notify_many answered ${Array.isArray(ids) ? `${ids.length} ids` : 'no ids'} for ${evs.length} events`);
  }
  return ids.map(String);
}
