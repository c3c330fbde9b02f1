import type { FastifyInstance, FastifyRequest } from 'fastify';
import { testEndpoint } from '../../admin/test-delivery.js';
import { endpointHealth, endpointView, type LocalDeliveries } from '../../endpoint-state/health.js';
import { pauseEndpoint, resumeEndpoint, type EndpointStateContext } from '../../endpoint-state/operator.js';
import type { Service } from '../../service.js';
import {
  createStoredEndpoint,
  deleteStoredEndpoint,
  rotateStoredSecret,
  updateStoredEndpoint,
  type Actor,
  type StoreContext,
} from '../../endpoints/store.js';
import { badField } from '../../errors.js';
import { encryptionKeyMissing } from '../../crypto/keys.js';
import type { Endpoint } from '../../config/index.js';
import { unmatchedPatterns } from '../../topics/view.js';
import { principalOf } from '../auth.js';
import { route, type AnswerAt } from '../route.js';

const NO_CODEC = {
  seal: (): string => {
    throw encryptionKeyMissing();
  },
  open: (): string => {
    throw encryptionKeyMissing();
  },
};

function actorOf(req: FastifyRequest): Actor {
  const p = principalOf(req);
  return { name: p.name, role: p.role };
}

/** Endpoints with their whitelist, shared state and recent health; pause, resume, and a `webhook.test` event to one of them. */
export function endpointRoutes(app: FastifyInstance, svc: Service): void {
  // This process's adaptive limits and in-flight deliveries (none without workers: jobs.enabled false).
  const local = (): LocalDeliveries => {
    const workers = svc.workers;
    return { caps: () => svc.limits.caps(), ...(workers ? { inFlightFor: (name: string) => workers.inFlightFor(name) } : {}) };
  };
  const ctx = (): EndpointStateContext => ({ pool: svc.db.pool, endpoints: svc.endpoints, channel: svc.channels.endpoints, log: svc.log });

  /** What this principal may see: a service only the endpoints it created. */
  const visible = (actor: Actor): readonly Endpoint[] =>
    actor.role === 'service' ? svc.endpoints.filter((e) => e.source === 'api' && e.owner === actor.name) : svc.endpoints;
  // Deleting needs no key (nothing is sealed or opened); creating and changing do.
  const store = (needKey = true): StoreContext => {
    const codec = svc.secretCodec ?? (needKey ? null : NO_CODEC);
    if (!codec) throw encryptionKeyMissing();
    const cfg = svc.config;
    return {
      pool: svc.db.pool,
      codec,
      configNames: svc.registry.configNames,
      channel: svc.channels.endpointDefs,
      serviceTopics: cfg.notify.webhook.service_endpoints.topics,
      tombstoneMs: cfg.jobs.job_purge.dead_retention,
      checkUrl: async (url) => {
        await svc.ssrfGuard.checkUrlResolved(url, 'url');
      },
    };
  };
  // A pattern that matches nothing in the topic catalog is most likely a typo (docs/operations.md#topic-catalog).
  const warn = (topics: readonly string[] | undefined): { warnings?: string[] } => {
    const warnings = unmatchedPatterns(topics ?? [], svc.topics.topics);
    return warnings.length > 0 ? { warnings } : {};
  };
  const checkBudget = (maxInFlight: number | undefined): void => {
    const total = svc.config.notify.webhook.max_in_flight_total;
    if (maxInFlight !== undefined && maxInFlight > total) {
      throw badField('max_in_flight', `must not exceed notify.webhook.max_in_flight_total (${total}), got ${maxInFlight}`);
    }
  };

  // Who sees what: viewers and admins every endpoint, a service its own (docs/operations.md#endpoints-at-run-time).
  route(app, 'listEndpoints', async ({ query }, req) => ({
    items: await endpointHealth(svc.db.pool, visible(actorOf(req)), query.window_minutes, local()),
  }));

  route(app, 'getEndpoint', async ({ params: { name } }, req) => endpointView(svc.db.pool, visible(actorOf(req)), name, local()));

  // The secret is in this answer only: stored encrypted, never shown again.
  route(app, 'createEndpoint', async ({ body: input }, req, reply) => {
    checkBudget(input.max_in_flight);
    const { secret } = await createStoredEndpoint(store(), input, actorOf(req));
    // This process delivers to it at once; the others within a second (NOTIFY, or their poll).
    await svc.registry.refresh(true);
    const created = { ...(await endpointView(svc.db.pool, svc.endpoints, input.name, local())), secret, ...warn(input.topics) };
    return reply.code(201).send(created satisfies AnswerAt<'createEndpoint', 201>);
  });

  route(app, 'updateEndpoint', async ({ params: { name }, body: patch }, req) => {
    checkBudget(patch.max_in_flight);
    await updateStoredEndpoint(store(), name, patch, actorOf(req));
    await svc.registry.refresh(true);
    return { ...(await endpointView(svc.db.pool, svc.endpoints, name, local())), ...warn(patch.topics) };
  });

  // The new secret is in this answer only; the old one keeps signing (X-ACW-Signature) until rotate_until.
  route(app, 'rotateEndpointSecret', async ({ params: { name }, body }, req) => {
    const out = await rotateStoredSecret(store(), name, body, actorOf(req), svc.config);
    await svc.registry.refresh(true);
    return { name, ...out };
  });

  route(app, 'deleteEndpoint', async ({ params: { name }, query }, req) => {
    const { cancelled_jobs } = await deleteStoredEndpoint(store(false), name, query.force ?? false, actorOf(req));
    await svc.registry.refresh(true);
    return { name, deleted: true as const, cancelled_jobs };
  });

  route(app, 'testEndpoint', async ({ params: { name } }, req, reply) => {
    return reply.code(202).send((await testEndpoint(svc, name, principalOf(req).name)) satisfies AnswerAt<'testEndpoint', 202>);
  });

  // 200 with the endpoint's view either way; `changed: false` when there was nothing to do.
  const stateChange =
    (fn: typeof pauseEndpoint) =>
    async ({ params: { name } }: { params: { name: string } }, req: FastifyRequest) => {
      const { changed } = await fn(ctx(), name, principalOf(req).name);
      return { ...(await endpointView(svc.db.pool, svc.endpoints, name, local())), changed };
    };
  route(app, 'pauseEndpoint', stateChange(pauseEndpoint));
  route(app, 'resumeEndpoint', stateChange(resumeEndpoint));
}
