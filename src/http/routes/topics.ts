import type { FastifyInstance } from 'fastify';
import { sendTestEvent } from '../../admin/test-delivery.js';
import { ApiError } from '../../errors.js';
import type { Service } from '../../service.js';
import { latest, readTopic, readTopics } from '../../topics/rows.js';
import { addTopicVersion, createTopic, updateTopic, type TopicStoreContext } from '../../topics/store.js';
import { topicView } from '../../topics/view.js';
import { principalOf } from '../auth.js';
import { route, type AnswerAt } from '../route.js';

const notFound = (name: string): ApiError => new ApiError(404, 'not_found', `name: no topic ${name}`, { field: 'name' });

/** The topic catalog (docs/operations.md#topic-catalog): read by viewers, written by admins, audited, live in every process. */
export function topicRoutes(app: FastifyInstance, svc: Service): void {
  const store = (): TopicStoreContext => ({ pool: svc.db.pool, channel: svc.channels.topics });
  const mode = svc.config.topics.validation;
  // Read from the table, not the catalog's copy: an answer shows what was just written, wherever.
  route(app, 'listTopics', async () => ({
    items: (await readTopics(svc.db.pool)).map((t) => topicView(t, mode, svc.endpoints)),
  }));

  route(app, 'getTopic', async ({ params: { name } }) => {
    const t = await readTopic(svc.db.pool, name);
    if (!t) throw notFound(name);
    return topicView(t, mode, svc.endpoints);
  });

  // Each write is seen by this process at once (the refresh) and by the others within a second.
  route(app, 'createTopic', async ({ body }, req, reply) => {
    const t = await createTopic(store(), body, principalOf(req).name);
    await svc.topics.refresh(true);
    return reply.code(201).send(topicView(t, mode, svc.endpoints) satisfies AnswerAt<'createTopic', 201>);
  });

  route(app, 'updateTopic', async ({ params: { name }, body }, req) => {
    const t = await updateTopic(store(), name, body, principalOf(req).name);
    await svc.topics.refresh(true);
    return topicView(t, mode, svc.endpoints);
  });

  route(app, 'addTopicVersion', async ({ params: { name }, body }, req, reply) => {
    const t = await addTopicVersion(store(), name, body, principalOf(req).name);
    await svc.topics.refresh(true);
    return reply.code(201).send(topicView(t, mode, svc.endpoints) satisfies AnswerAt<'addTopicVersion', 201>);
  });

  route(app, 'sendTopicExample', async ({ params: { name }, body }, req, reply) => {
    const t = await readTopic(svc.db.pool, name);
    const v = t && latest(t);
    if (!t || !v) throw notFound(name);
    const k = body.example ?? 0;
    if (k >= v.examples.length)
      throw new ApiError(404, 'not_found', `example: topic ${name} has ${v.examples.length} example(s) in version ${v.version}`, {
        field: 'example',
      });
    const sent = await sendTestEvent(svc, body.endpoint, principalOf(req).name, {
      topic: name,
      data: v.examples[k],
      schemaVersion: v.version,
    });
    return reply.code(202).send(sent satisfies AnswerAt<'sendTopicExample', 202>);
  });
}
