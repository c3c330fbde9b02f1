import { withTransaction } from '../db/pool.js';
import { enqueueJobs } from '../queue/transitions.js';
import type { Service } from '../service.js';
import { WEBHOOK_JOB, type DeliverPayload } from '../webhook/job.js';
import { writeAudit } from './audit.js';
import { ApiError } from '../errors.js';
import { prepareTestDelivery } from '../endpoint-state/operator.js';
import { requireEndpoint } from './params.js';

export const TEST_TOPIC = 'webhook.test';

/**
 * Send a `webhook.test` event to one endpoint only, whatever its whitelist: the event row is written
 * already dispatched (so the dispatcher never fans it out) and its one job is enqueued directly.
 */
export async function testEndpoint(svc: Service, name: string, actor: string): Promise<{ event_id: string; job_ids: string[] }> {
  const data = { message: 'test event from acw-webhooks', endpoint: name, requested_by: actor };
  return sendTestEvent(svc, name, actor, { topic: TEST_TOPIC, data });
}

/**
 * The same for any topic and data: the topic catalog's "send example" (a topic's example, sent with
 * its schema version, to one endpoint). Its job is a job of its own: no real job spends an attempt.
 */
export async function sendTestEvent(
  svc: Service,
  name: string,
  actor: string,
  ev: { topic: string; data: unknown; schemaVersion?: number },
): Promise<{ event_id: string; job_ids: string[] }> {
  const ep = requireEndpoint(svc.endpoints, name);
  if (!ep.enabled) {
    throw new ApiError(409, 'endpoint_disabled', `endpoint ${name} is disabled: a test would wait until it is enabled`, { field: 'name' });
  }
  const { topic, data } = ev;
  const result = await withTransaction(svc.db.pool, async (client) => {
    // Paused: 409 before anything is written. Open: the test job waits for the probe, so probe now.
    const { probeNow } = await prepareTestDelivery(client, svc.channels.endpoints, name);
    const row = await client.query<{ id: string }>(
      `insert into event_log (topic, data, principal, dispatched_at, schema_version) values ($1, $2::jsonb, $3, now(), $4)
       returning id`,
      [topic, JSON.stringify(data), actor, ev.schemaVersion ?? null],
    );
    const { id: eventId } = row.rows[0]!;
    // Its event is in event_log: the body is made from it, as for any event's job.
    const payload: DeliverPayload = {
      topic,
      ...(ev.schemaVersion !== undefined ? { schema_version: ev.schemaVersion } : {}),
    };
    const jobIds = await enqueueJobs(
      client,
      [{ type: WEBHOOK_JOB, payload, maxAttempts: svc.config.jobs.max_attempts, eventId, endpoint: name }],
      svc.channels.jobs,
    );
    const res = { event_id: eventId, job_ids: jobIds };
    const details = { ...res, ...(topic === TEST_TOPIC ? {} : { topic }), ...(probeNow ? { probe_now: true } : {}) };
    await writeAudit(client, { action: 'endpoint.test', actor, targetType: 'endpoint', targetId: name, details });
    return res;
  });
  svc.metrics.jobsEnqueued(WEBHOOK_JOB, topic, result.job_ids.length);
  return result;
}
