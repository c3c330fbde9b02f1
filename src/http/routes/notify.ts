import type { FastifyInstance } from 'fastify';
import { noWorkerWarning } from '../../admin/processes.js';
import { WEBHOOK_JOB } from '../../webhook/job.js';
import { notifyBatchNow, notifyNow, type NotifyAnswer } from '../../notify/notify.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { headerIdempotencyKey, notifyKey } from '../idempotency-key.js';
import { route, type AnswerAt } from '../route.js';

/**
 * The answer as sent: `replayed` is added here, not stored (the kept answer is the first one, which
 * was no replay). It is written through the answer's schema, so whatever else an older version
 * stored with it stays out.
 */
function answer(a: NotifyAnswer): NotifyAnswer['body'] & { replayed: boolean } {
  return { ...a.body, replayed: a.status === 200 };
}

/** `POST /v1/notify` and `/v1/notify/batch`: dispatched at once, idempotent per (user, key). */
export function notifyRoutes(app: FastifyInstance, svc: Service): void {
  const count = (topic: string, a: NotifyAnswer): void => {
    if (a.status === 202) svc.metrics.jobsEnqueued(WEBHOOK_JOB, topic, a.body.job_ids.length);
  };

  route(app, 'notify', async ({ body: input }, req, reply) => {
    // The key may come as a header (docs/integrate.md#idempotency-keys): the same as the body's, or alone.
    const header = headerIdempotencyKey(req.headers['idempotency-key']);
    if (header !== undefined) input.idempotency_key = notifyKey(header, input.idempotency_key);
    const [ans, warning] = await Promise.all([
      notifyNow(svc.db.pool, input, principalOf(req).name, svc.fanOutContext),
      noWorkerWarning(svc.db.pool),
    ]);
    count(input.topic, ans);
    return reply.code(ans.status).send((warning ? { ...answer(ans), warning } : answer(ans)) satisfies AnswerAt<'notify', 202>);
  });

  route(app, 'notifyBatch', async ({ body: { events } }, req, reply) => {
    const [answers, warning] = await Promise.all([
      notifyBatchNow(svc.db.pool, events, principalOf(req).name, svc.fanOutContext),
      noWorkerWarning(svc.db.pool),
    ]);
    // One counter increment per topic, not per event: a label lookup each.
    const jobs = new Map<string, number>();
    answers.forEach((a, i) => {
      if (a.status === 202) jobs.set(events[i]!.topic, (jobs.get(events[i]!.topic) ?? 0) + a.body.job_ids.length);
    });
    for (const [topic, n] of jobs) svc.metrics.jobsEnqueued(WEBHOOK_JOB, topic, n);
    // 200 only when every event was a replay of an earlier call: nothing new was accepted.
    const status = answers.every((a) => a.status === 200) ? 200 : 202;
    const sent = { results: answers.map(answer), ...(warning ? { warning } : {}) };
    return reply.code(status).send(sent satisfies AnswerAt<'notifyBatch', 202>);
  });
}
