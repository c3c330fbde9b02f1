/**
 * The outbox's events validated at dispatch (docs/operations.md#topic-catalog): `notify(db, …)`
 * writes in the application's transaction, through SQL functions that know no catalog, so the
 * dispatcher checks each event before its fan-out, in the transaction that marks it dispatched.
 * Under enforce a failing event is marked rejected, gets no job, and raises an alert naming its
 * topic and pointer; under warn it goes out, logged and counted.
 */
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { EventRow } from '../notify/fan-out.js';
import type { AlertSinks } from '../sinks/outlet.js';
import type { CatalogView } from './catalog.js';
import { checkOne, reportMismatch } from './check.js';
import { problemText } from './validate.js';

export interface OutboxCheckContext {
  alertsChannel: string;
  sinks?: AlertSinks | null;
  log: Logger;
  metrics?: { schemaMismatch(topic: string, mode: string): void };
}

/** The events to fan out (with their schema versions); the rejected ones are marked and alerted here. */
export async function screenOutboxEvents(
  client: Queryable,
  rows: readonly EventRow[],
  view: CatalogView,
  ctx: OutboxCheckContext,
): Promise<EventRow[]> {
  const accepted: EventRow[] = [];
  const rejected: Array<{ ev: EventRow; why: string; problems: string[] }> = [];
  for (const ev of rows) {
    const r = checkOne(view, ev.topic, ev.data, '/data');
    if (r.problems.length > 0) reportMismatch(ctx.log, ev.topic, r.mode, r.problems, ctx.metrics);
    if (r.mode === 'enforce' && r.problems.length > 0) {
      const problems = r.problems.map(problemText);
      rejected.push({ ev, why: problems.join('; ').slice(0, 2000), problems: problems.slice(0, 20) });
      continue;
    }
    accepted.push(r.version === undefined ? ev : { ...ev, schema_version: r.version });
  }
  const versioned = accepted.filter((e) => e.schema_version != null);
  if (versioned.length > 0) {
    await client.query(`update event_log e set schema_version = v.sv from unnest($1::uuid[], $2::int[]) v(id, sv) where e.id = v.id`, [
      versioned.map((e) => e.id),
      versioned.map((e) => e.schema_version),
    ]);
  }
  if (rejected.length > 0) await reject(client, rejected, ctx);
  return accepted;
}

async function reject(
  client: Queryable,
  rejected: Array<{ ev: EventRow; why: string; problems: string[] }>,
  ctx: OutboxCheckContext,
): Promise<void> {
  await client.query(`update event_log e set rejected = r.why from unnest($1::uuid[], $2::text[]) r(id, why) where e.id = r.id`, [
    rejected.map((r) => r.ev.id),
    rejected.map((r) => r.why),
  ]);
  // One alert per event (docs/operations.md#alerts): an audit row, an inbox message per admin, a NOTIFY to followers.
  const res = await client.query<{ id: string; created_at: Date; details: Record<string, unknown> }>(
    `with a as (
       insert into audit_log (action, actor, target_type, target_id, details)
       select 'topic.event_rejected', 'system', 'event', r.id::text, r.details
       from unnest($1::uuid[], $2::jsonb[]) r(id, details)
       returning id, created_at, details),
     n as (
       insert into notifications (user_id, topic, data)
       select u.id, 'topic.event_rejected', a.details || jsonb_build_object('audit_id', a.id)
       from a cross join users u where u.role = 'admin' and u.revoked_at is null)
     select a.id, a.created_at, a.details, pg_notify($3, a.id::text) from a`,
    [
      rejected.map((r) => r.ev.id),
      rejected.map((r) =>
        JSON.stringify({ event_id: r.ev.id, topic: r.ev.topic, pointer: r.problems[0]!.split(': ')[0], problems: r.problems }),
      ),
      ctx.alertsChannel,
    ],
  );
  for (const r of rejected)
    ctx.log.warn(
      { event: 'notify.event_rejected', event_id: r.ev.id, topic: r.ev.topic, problems: r.problems },
      `outbox event ${r.ev.id} of ${r.ev.topic} rejected: its data does not match its schema (validation enforce)`,
    );
  await ctx.sinks?.enqueue(
    client,
    res.rows.map((row) => ({
      id: Number(row.id),
      action: 'topic.event_rejected' as const,
      createdAt: row.created_at,
      details: row.details,
    })),
  );
}
