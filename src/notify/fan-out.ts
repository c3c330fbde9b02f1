import type pg from 'pg';
import { topicMatches, type Endpoint } from '../config/index.js';
import type { Logger } from '../log.js';
import type { CatalogView } from '../topics/catalog.js';
import type { OnMismatch } from '../topics/check.js';
import type { Handover, JobAdopter } from '../queue/handover.js';
import { insertJobs } from '../queue/transitions.js';
import type { JobEvent, NewJob } from '../queue/types.js';
import { WEBHOOK_JOB, buildBody, jobEventOf, webhookJobId, type DeliverPayload } from '../webhook/job.js';
import type { TraceCarrier } from '../tracing/carrier.js';

/**
 * The fan-out: one event becomes one inbox message per recipient and one `webhook.deliver`
 * job per enabled endpoint whose whitelist matches. Run inside the caller's transaction by the
 * HTTP notify (at once) and by the outbox pump (for events applications wrote themselves).
 */

export interface EventRow {
  id: string;
  topic: string;
  data: unknown;
  recipients: string[];
  created_at: Date;
  /** Its ordering key (docs/operations.md#ordered-delivery): its jobs go in order per endpoint and key. */
  ordering_key?: string | null;
  /** Its producer's trace context, copied into each of its jobs (docs/operations.md#tracing). */
  trace?: TraceCarrier | undefined;
  /** The topic's schema version it was validated against (sent as X-ACW-Schema-Version). */
  schema_version?: number | null | undefined;
}

export interface FanOutContext {
  /** Read at fan-out time: the whitelist in force now applies. */
  endpoints: () => readonly Endpoint[];
  webhooksEnabled: () => boolean;
  maxAttempts: number;
  jobsChannel: string;
  log: Logger;
  /** This process's worker pool, when it runs one: the jobs it has room for are inserted already claimed. */
  adopter?: () => JobAdopter | null;
  /** The topic catalog events are validated against (docs/operations.md#topic-catalog); none: no validation. */
  topics?: () => CatalogView | null;
  /** Told of each event that does not match its topic's schema (a log line and a metric). */
  onSchemaMismatch?: OnMismatch;
}

export interface FanOutResult {
  event_id: string;
  job_ids: string[];
  /** Why no job was written, when none was. */
  skipped?: 'webhooks_disabled' | 'no_matching_endpoint';
  /** Recipients named that are no user (outbox events only; the HTTP route refuses them first). */
  unknown_recipients?: string[];
  /** The topic's schema version the data was validated against. */
  schema_version?: number;
  /** Under validation warn: what did not match (JSON Pointers); a deprecated topic says so. */
  warnings?: string[];
}

export interface FanOutOptions {
  /** Jobs this process's pool can take go in as running (see Handover). */
  handover?: Handover;
  /** The caller already set `dispatched_at` on these events (the outbox pump locks and marks in one statement). */
  marked?: boolean;
  /** Leave jobs that exist already alone instead of failing (see insertJobs). */
  skipExisting?: boolean;
  /**
   * The events are rows of the table of events from before migration 0012, which the purge drops
   * whole without looking at jobs: their jobs carry their body (buildBody), as before migration 0018.
   */
  withBody?: boolean;
  /**
   * A statement of the caller's on the same connection: the fan-out's first statement goes only once
   * it has finished (and not at all if it fails), its jobs made meanwhile. One statement at a time
   * on a connection, which pg 9 will require.
   */
  after?: Promise<unknown>;
}

/** What the fan-out of one event will write: its answer and the endpoints that get a job. */
export interface FanOutPlan {
  result: FanOutResult;
  endpoints: readonly string[];
}

/**
 * The fan-out's answers before anything is written, under the whitelist in force now (read once
 * for all the events given to it): the HTTP notify stores each answer with its event.
 */
export function fanOutPlanner(ctx: FanOutContext): (ev: { id: string; topic: string }) => FanOutPlan {
  const enabled = ctx.webhooksEnabled();
  const endpoints = enabled ? ctx.endpoints().filter((e) => e.enabled) : [];
  // A batch mostly repeats a few topics: the whitelist is matched once per topic.
  const byTopic = new Map<string, string[]>();
  return (ev) => {
    let matching = byTopic.get(ev.topic);
    if (matching === undefined) {
      matching = endpoints.filter((e) => topicMatches(e.topics, ev.topic)).map((e) => e.name);
      byTopic.set(ev.topic, matching);
    }
    if (matching.length > 0)
      return { result: { event_id: ev.id, job_ids: matching.map((name) => webhookJobId(ev.id, name)) }, endpoints: matching };
    return { result: { event_id: ev.id, job_ids: [], skipped: enabled ? 'no_matching_endpoint' : 'webhooks_disabled' }, endpoints: [] };
  };
}

/**
 * Fan events out, inside the caller's transaction: one inbox message per recipient and one
 * `webhook.deliver` job per enabled endpoint whose whitelist matches, then mark them dispatched.
 */
export async function fanOut(
  client: pg.ClientBase,
  events: readonly EventRow[],
  ctx: FanOutContext,
  opts: FanOutOptions = {},
): Promise<FanOutResult[]> {
  if (events.length === 0) return [];
  const plan = fanOutPlanner(ctx);
  return writeFanOut(client, events, events.map(plan), ctx, opts);
}

/** Write what `plans` (from fanOutPlanner, one per event) say; their results are the answers. */
export async function writeFanOut(
  client: pg.ClientBase,
  events: readonly EventRow[],
  plans: readonly FanOutPlan[],
  ctx: FanOutContext,
  opts: FanOutOptions = {},
): Promise<FanOutResult[]> {
  if (events.length === 0) return [];
  const jobs: NewJob[] = [];
  // Each endpoint's `ordering` setting, read only when an event has a key.
  let strict: Set<string> | undefined;
  const results = events.map((ev, i) => {
    const { result, endpoints } = plans[i]!;
    if (endpoints.length > 0) {
      // No body: the claim makes it from the event (docs/architecture.md#bodies-by-reference).
      const payload: DeliverPayload = {
        topic: ev.topic,
        ...(ev.schema_version != null ? { schema_version: ev.schema_version } : {}),
        ...(opts.withBody ? { body: buildBody({ id: ev.id, topic: ev.topic, occurredAt: ev.created_at, data: ev.data }) } : {}),
        ...ev.trace,
      };
      // What a claim would read of the event, for the jobs this process's pool takes at once.
      let made: JobEvent | undefined;
      const event = (): JobEvent => (made ??= jobEventOf(ev.data, ev.created_at));
      const key = ev.ordering_key ?? null;
      if (key !== null) strict ??= new Set(ctx.endpoints().flatMap((e) => (e.ordering === 'strict' ? [e.name] : [])));
      endpoints.forEach((name, k) =>
        jobs.push({
          id: result.job_ids[k],
          type: WEBHOOK_JOB,
          payload,
          maxAttempts: ctx.maxAttempts,
          eventId: ev.id,
          endpoint: name,
          ...(key !== null ? { orderingKey: key, strictOrdering: strict?.has(name) === true } : {}),
          event,
        }),
      );
    } else {
      ctx.log.info({ event: 'webhook.skipped', event_id: ev.id, topic: ev.topic, reason: result.skipped }, 'no webhook job for this event');
    }
    return result;
  });
  await opts.after;
  const inserted = await insertJobs(client, jobs, ctx.jobsChannel, opts.handover?.reserve(jobs), {
    skipExisting: opts.skipExisting === true,
    copy: true,
  });
  opts.handover?.inserted(inserted.leased);
  if (ctx.log.isLevelEnabled('debug')) {
    for (const id of inserted.ids) ctx.log.debug({ event: 'job.enqueued', job_id: id, type: WEBHOOK_JOB }, 'job enqueued');
  }

  const withRecipients = events.filter((e) => e.recipients.length > 0);
  if (withRecipients.length > 0) {
    const res = await client.query<{ event_id: string; missing: string[] | null }>(
      `with r as (
         select e.id as event_id, e.topic, e.data, unnest(e.recipients) as name
         from event_log e where e.id = any($1::uuid[])),
       ins as (
         insert into notifications (user_id, topic, data, event_id)
         select u.id, r.topic, r.data, r.event_id from r join users u on u.name = r.name and u.revoked_at is null
         returning 1)
       select r.event_id, array_agg(r.name) filter (where u.id is null) as missing
       from r left join users u on u.name = r.name and u.revoked_at is null
       group by r.event_id`,
      [withRecipients.map((e) => e.id)],
    );
    for (const row of res.rows) {
      if (!row.missing || row.missing.length === 0) continue;
      const r = results.find((x) => x.event_id === row.event_id);
      if (r) r.unknown_recipients = row.missing;
      ctx.log.warn({ event: 'notify.unknown_recipients', event_id: row.event_id, recipients: row.missing }, 'recipients are no user');
    }
  }
  if (!opts.marked) {
    await client.query({
      name: 'acw_mark_dispatched',
      text: `update event_log set dispatched_at = now() where id = any($1::uuid[])`,
      values: [events.map((e) => e.id)],
    });
  }
  return results;
}
