import { withTransaction } from '../db/pool.js';
import { enqueueJobs } from '../queue/transitions.js';
import type { Service } from '../service.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../webhook/job.js';
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
  const ep = requireEndpoint(svc.endpoints, name);
  if (!ep.enabled) {
    throw new ApiError(409, 'endpoint_disabled', `endpoint ${name} is disabled: a test would wait until it is enabled`, { field: 'name' });
  }
  const data = { message: 'test event from acw-webhooks', endpoint: name, requested_by: actor };
  const result = await withTransaction(svc.db.pool, async (client) => {
    // Paused: 409 before anything is written. Open: the test job waits for the probe, so probe now.
    const { probeNow } = await prepareTestDelivery(client, svc.channels.endpoints, name);
    const ev = await client.query<{ id: string; created_at: Date }>(
      `insert into event_log (topic, data, principal, dispatched_at) values ($1, $2::jsonb, $3, now()) returning id, created_at`,
      [TEST_TOPIC, JSON.stringify(data), actor],
    );
    const { id: eventId, created_at: occurredAt } = ev.rows[0]!;
    const payload: DeliverPayload = { topic: TEST_TOPIC, body: buildBody({ id: eventId, topic: TEST_TOPIC, occurredAt, data }) };
    const jobIds = await enqueueJobs(
      client,
      [{ type: WEBHOOK_JOB, payload, maxAttempts: svc.config.jobs.max_attempts, eventId, endpoint: name }],
      svc.channels.jobs,
    );
    const res = { event_id: eventId, job_ids: jobIds };
    const details = probeNow ? { ...res, probe_now: true } : res;
    await writeAudit(client, { action: 'endpoint.test', actor, targetType: 'endpoint', targetId: name, details });
    return res;
  });
  svc.metrics.jobsEnqueued(WEBHOOK_JOB, TEST_TOPIC, result.job_ids.length);
  return result;
}
