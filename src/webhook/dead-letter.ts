import type pg from 'pg';
import type { AlertAction } from '../admin/alert-actions.js';
import type { DeadHook, DeadJob } from '../queue/types.js';
import type { AlertSinks } from '../sinks/outlet.js';
import { WEBHOOK_JOB } from './job.js';
import { carrierOf, type TraceCarrier } from '../tracing/carrier.js';
import { tracing } from '../tracing/runtime.js';

/**
 * The dead-letter safety net (docs/operations.md#dead-letter), run by the queue inside the transaction that
 * moved the jobs to dead and only for rows that transaction changed: one audit_log row per job,
 * one inbox message per admin, and a NOTIFY on the alerts channel carrying the newest audit
 * id. The rows are the exactly-once record; the NOTIFY only wakes listeners. While an endpoint is
 * failing, its dead jobs send no inbox message each: they are counted, and the alert that ends it
 * says how many. With alert sinks, each dead letter also gets its sinks' deliveries in the same
 * transaction (docs/operations.md#alert-sinks), except, as for the inbox, a failing endpoint's.
 */
function topicOf(j: DeadJob): string | null {
  const p = j.payload as { topic?: unknown } | null;
  return typeof p === 'object' && p !== null && typeof p.topic === 'string' ? p.topic : null;
}

interface LetterRow {
  id: string;
  action: AlertAction;
  created_at: Date;
  details: Record<string, unknown>;
}

/** The last statement: the NOTIFY alone, or with the dead letters the sinks get (none of a failing endpoint). */
const NOTIFY_ONLY = `select pg_notify($10, max(id)::text) from a`;
const NOTIFY_AND_ROWS = `select a.id, a.action, a.created_at, a.details
       from a cross join (select pg_notify($10, max(id)::text) from a) nt
       where a.details->>'endpoint' is null or a.details->>'endpoint' not in (select endpoint from f)`;

export function deadLetterHook(alertsChannel: string, sinks: AlertSinks | null = null): DeadHook {
  const write = async (client: pg.ClientBase, jobs: DeadJob[]): Promise<void> => {
    const res = await client.query<LetterRow>(
      `with j as (
         select * from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::uuid[], $8::text[])
           as t(id, type, endpoint, last_error, attempts, reason, event_id, topic)),
       a as (
         insert into audit_log (action, actor, target_type, target_id, details)
         select case when j.type = $9 then 'webhook.dead_letter' else 'job.dead_letter' end, 'system', 'job', j.id::text,
           jsonb_build_object('job_id', j.id, 'type', j.type, 'endpoint', j.endpoint, 'topic', j.topic, 'event_id', j.event_id,
                              'attempts', j.attempts, 'reason', j.reason, 'last_error', j.last_error)
         from j
         returning id, action, created_at, details),
       -- Endpoints failing now (docs/operations.md#failing-endpoints), locked in name order: their
       -- dead jobs are counted for the summary that ends it, and send no message each.
       f as (
         select s.endpoint from endpoint_state s where s.failing and s.endpoint in (select endpoint from j)
         order by s.endpoint for update),
       c as (
         update endpoint_state s set failing_dead = s.failing_dead + k.n
         from (select j.endpoint, count(*)::int as n from j join f on f.endpoint = j.endpoint group by j.endpoint) k
         where s.endpoint = k.endpoint),
       n as (
         insert into notifications (user_id, topic, data, event_id)
         select u.id, case when a.details->>'type' = $9 then 'webhook.dead_letter' else 'job.dead_letter' end,
           a.details || jsonb_build_object('audit_id', a.id), (a.details->>'event_id')::uuid
         from a cross join users u
         where u.role = 'admin' and u.revoked_at is null
           and (a.details->>'endpoint' is null or a.details->>'endpoint' not in (select endpoint from f)))
       ${sinks ? NOTIFY_AND_ROWS : NOTIFY_ONLY}`,
      [
        jobs.map((j) => j.id),
        jobs.map((j) => j.type),
        jobs.map((j) => j.endpoint),
        jobs.map((j) => j.lastError),
        jobs.map((j) => j.attempts),
        jobs.map((j) => j.reason),
        jobs.map((j) => j.eventId),
        jobs.map(topicOf),
        WEBHOOK_JOB,
        alertsChannel,
      ],
    );
    if (sinks) {
      await sinks.enqueue(
        client,
        res.rows.map((r) => ({ id: Number(r.id), action: r.action, createdAt: r.created_at, details: r.details })),
      );
    }
    const keyed = jobs.filter((j) => j.orderingKey != null && j.endpoint !== null);
    if (keyed.length > 0) await keyBlockedAlerts(client, keyed, alertsChannel, sinks);
  };
  return async (client: pg.ClientBase, jobs: DeadJob[]) => {
    if (jobs.length === 0) return;
    const t = tracing;
    // A span of its own, linked to the notifies whose deliveries died (docs/operations.md#tracing).
    if (t) await t.deadLetter(jobs.map(traceOfJob), () => write(client, jobs));
    else await write(client, jobs);
  };
}

function traceOfJob(j: DeadJob): TraceCarrier | undefined {
  const p = j.payload as { traceparent?: unknown; tracestate?: unknown } | null;
  return typeof p === 'object' && p !== null ? carrierOf(p.traceparent, p.tracestate) : undefined;
}

/**
 * Of these dead jobs, the heads that now block their keys (a strict endpoint's, docs/operations.md#blocked-keys):
 * one `webhook.key_blocked` alert each, with its inbox messages, NOTIFY and sinks, as a dead letter's.
 * The dead-letter hook runs it; so does the expiry of held jobs (a head dead by max age), which
 * writes no dead letter.
 */
export async function keyBlockedAlerts(
  client: pg.ClientBase,
  jobs: ReadonlyArray<Pick<DeadJob, 'id' | 'endpoint' | 'orderingKey' | 'lastError'>>,
  alertsChannel: string,
  sinks: AlertSinks | null,
): Promise<void> {
  const res = await client.query<LetterRow>(
    `with b as (
       select o.endpoint, o.ordering_key, o.head, j.last_error
       from unnest($1::text[], $2::text[], $3::uuid[], $4::text[]) j(endpoint, okey, id, last_error)
       join ordering_keys o on o.endpoint = j.endpoint and o.ordering_key = j.okey and o.head = j.id and o.blocked_at is not null),
     a as (
       insert into audit_log (action, actor, target_type, target_id, details)
       select 'webhook.key_blocked', 'system', 'job', b.head::text,
         jsonb_build_object('endpoint', b.endpoint, 'ordering_key', b.ordering_key, 'job_id', b.head, 'last_error', b.last_error)
       from b
       returning id, action, created_at, details),
     n as (
       insert into notifications (user_id, topic, data, event_id)
       select u.id, 'webhook.key_blocked', a.details || jsonb_build_object('audit_id', a.id), null
       from a cross join users u where u.role = 'admin' and u.revoked_at is null)
     select a.id, a.action, a.created_at, a.details from a cross join (select pg_notify($5, max(id)::text) from a) nt`,
    [jobs.map((j) => j.endpoint), jobs.map((j) => j.orderingKey), jobs.map((j) => j.id), jobs.map((j) => j.lastError), alertsChannel],
  );
  if (sinks && res.rows.length > 0)
    await sinks.enqueue(
      client,
      res.rows.map((r) => ({ id: Number(r.id), action: r.action, createdAt: r.created_at, details: r.details })),
    );
}
