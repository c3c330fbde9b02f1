import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { topicMatches, type Endpoint } from '../config/index.js';
import type { Logger } from '../log.js';
import { enqueueJobs } from '../queue/store.js';
import type { NewJob } from '../queue/types.js';
import { buildBody } from '../webhook/sign.js';

export const WEBHOOK_JOB = 'webhook.deliver';

/** What the `webhook.deliver` job carries: the body is fixed here, so every retry sends the same bytes. */
export interface DeliverPayload {
  topic: string;
  body: string;
}

export interface EventRow {
  id: string;
  topic: string;
  data: unknown;
  recipients: string[];
  created_at: Date;
}

export interface DispatchContext {
  /** Read at dispatch time: the whitelist in force now applies. */
  endpoints: () => readonly Endpoint[];
  webhooksEnabled: () => boolean;
  maxAttempts: number;
  jobsChannel: string;
  log: Logger;
}

export interface DispatchResult {
  event_id: string;
  job_ids: string[];
  /** Why no job was written, when none was. */
  skipped?: 'webhooks_disabled' | 'no_matching_endpoint';
  /** Recipients named that are no user (outbox events only; the HTTP route refuses them first). */
  unknown_recipients?: string[];
}

/**
 * Fan events out, inside the caller's transaction: one in-app notification per recipient and one
 * `webhook.deliver` job per enabled endpoint whose whitelist matches, then mark them dispatched.
 */
export async function dispatchEvents(client: pg.ClientBase, events: readonly EventRow[], ctx: DispatchContext): Promise<DispatchResult[]> {
  if (events.length === 0) return [];
  const enabled = ctx.webhooksEnabled();
  const endpoints = enabled ? ctx.endpoints().filter((e) => e.enabled) : [];
  const jobs: NewJob[] = [];
  const results: DispatchResult[] = events.map((ev) => {
    const matching = endpoints.filter((e) => topicMatches(e.topics, ev.topic));
    if (matching.length > 0) {
      const payload: DeliverPayload = {
        topic: ev.topic,
        body: buildBody({ id: ev.id, topic: ev.topic, occurredAt: ev.created_at, data: ev.data }),
      };
      const jobIds = matching.map(() => randomUUID());
      matching.forEach((e, k) =>
        jobs.push({ id: jobIds[k], type: WEBHOOK_JOB, payload, maxAttempts: ctx.maxAttempts, eventId: ev.id, endpoint: e.name }),
      );
      return { event_id: ev.id, job_ids: jobIds };
    }
    const skipped = enabled ? 'no_matching_endpoint' : 'webhooks_disabled';
    ctx.log.info({ event: 'webhook.skipped', event_id: ev.id, topic: ev.topic, reason: skipped }, 'no webhook job for this event');
    return { event_id: ev.id, job_ids: [], skipped };
  });
  const ids = await enqueueJobs(client, jobs, ctx.jobsChannel);
  for (const id of ids) ctx.log.debug({ event: 'job.enqueued', job_id: id, type: WEBHOOK_JOB }, 'job enqueued');

  const withRecipients = events.filter((e) => e.recipients.length > 0);
  if (withRecipients.length > 0) {
    const res = await client.query<{ event_id: string; missing: string[] | null }>(
      `with r as (
         select e.id as event_id, e.topic, e.data, unnest(e.recipients) as name
         from events e where e.id = any($1::uuid[])),
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
  await client.query(`update events set dispatched_at = now() where id = any($1::uuid[])`, [events.map((e) => e.id)]);
  return results;
}
