import { quoteIdent } from './db/sql.js';
import { notifyInput, type NotifyInput } from './notify/input.js';

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

export interface OutboxEvent {
  topic: string;
  data: unknown;
  recipients?: string[];
  idempotencyKey?: string;
  orderingKey?: string;
}

export class OutboxError extends Error {
  override readonly name = 'OutboxError';
}

function validate(e: OutboxEvent, path: string): NotifyInput {
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

/** Record one event in the caller's transaction; resolves with its id. */
export async function notify(db: OutboxDb, topic: string, data: unknown, opts: OutboxOptions = {}): Promise<string> {
  const ev = validate({ topic, data, ...opts }, '');
  // Options go in the sixth argument, an object (migration "ordering"); without any, the call stays
  // the four-argument one every version of the function takes.
  const options = ev.ordering_key !== undefined ? { ordering_key: ev.ordering_key } : null;
  const res = options
    ? await db.query(`select ${schemaOf(opts.schema)}.acw_notify($1, $2::jsonb, $3::text[], $4, $5, $6::jsonb) as id`, [
        ev.topic,
        JSON.stringify(ev.data),
        ev.recipients ?? [],
        ev.idempotency_key ?? null,
        'outbox',
        JSON.stringify(options),
      ])
    : await db.query(`select ${schemaOf(opts.schema)}.acw_notify($1, $2::jsonb, $3::text[], $4) as id`, [
        ev.topic,
        JSON.stringify(ev.data),
        ev.recipients ?? [],
        ev.idempotency_key ?? null,
      ]);
  return String(res.rows[0]?.id);
}

/**
 * Record many events in one statement, in the caller's transaction; resolves with their ids in order.
 * One set-based insert and one NOTIFY for the whole batch (`acw_notify_many`, migration 0003), with the
 * same answers as `notify()` called for each event in turn: a key already taken, by an earlier event or
 * earlier in the same batch, answers with the event holding it and writes nothing.
 */
export async function notifyMany(db: OutboxDb, events: readonly OutboxEvent[], opts: { schema?: string } = {}): Promise<string[]> {
  if (events.length === 0) return [];
  const evs = events.map((e, i) => validate(e, `events[${i}].`));
  const res = await db.query(`select ${schemaOf(opts.schema)}.acw_notify_many($1::jsonb) as ids`, [JSON.stringify(evs)]);
  const ids: unknown = res.rows[0]?.ids;
  if (!Array.isArray(ids) || ids.length !== evs.length) {
    throw new Error(`acw_notify_many answered ${Array.isArray(ids) ? `${ids.length} ids` : 'no ids'} for ${evs.length} events`);
  }
  return ids.map(String);
}
