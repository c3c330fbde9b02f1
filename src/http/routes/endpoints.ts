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
import { ADMIN, principalOf, READ } from '../auth.js';
import {
  createEndpointBody,
  deleteEndpointQuery,
  emptyBody,
  emptyQuery,
  endpointParams,
  endpointsQuery,
  parse,
  rotateSecretBody,
  updateEndpointBody,
} from '../schemas.js';

/** Who may read endpoints: viewers and admins all of them, a service its own (docs/operations.md#endpoints-at-run-time). */
const READ_OR_SERVICE = [...READ, 'service'] as const;
/** Who may create, change and delete stored endpoints (a service: its own, within its granted topics). */
const WRITE = ['admin', 'service'] as const;

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
  const checkBudget = (maxInFlight: number | undefined): void => {
    const total = svc.config.notify.webhook.max_in_flight_total;
    if (maxInFlight !== undefined && maxInFlight > total) {
      throw badField('max_in_flight', `must not exceed notify.webhook.max_in_flight_total (${total}), got ${maxInFlight}`);
    }
  };

  app.get('/v1/endpoints', { config: { roles: READ_OR_SERVICE } }, async (req) => {
    const q = parse(endpointsQuery, req.query, 'query');
    return { items: await endpointHealth(svc.db.pool, visible(actorOf(req)), q.window_minutes, local()) };
  });

  app.get('/v1/endpoints/:name', { config: { roles: READ_OR_SERVICE } }, async (req) => {
    const { name } = parse(endpointParams, req.params, 'params');
    parse(emptyQuery, req.query, 'query');
    return endpointView(svc.db.pool, visible(actorOf(req)), name, local());
  });

  // The secret is in this answer only: stored encrypted, never shown again.
  app.post('/v1/endpoints', { config: { roles: WRITE } }, async (req, reply) => {
    const input = parse(createEndpointBody, req.body, 'body');
    checkBudget(input.max_in_flight);
    const { secret } = await createStoredEndpoint(store(), input, actorOf(req));
    // This process delivers to it at once; the others within a second (NOTIFY, or their poll).
    await svc.registry.refresh(true);
    return reply.code(201).send({ ...(await endpointView(svc.db.pool, svc.endpoints, input.name, local())), secret });
  });

  app.patch('/v1/endpoints/:name', { config: { roles: WRITE } }, async (req) => {
    const { name } = parse(endpointParams, req.params, 'params');
    const patch = parse(updateEndpointBody, req.body, 'body');
    checkBudget(patch.max_in_flight);
    await updateStoredEndpoint(store(), name, patch, actorOf(req));
    await svc.registry.refresh(true);
    return endpointView(svc.db.pool, svc.endpoints, name, local());
  });

  // The new secret is in this answer only; the old one keeps signing (X-ACW-Signature) until rotate_until.
  app.post('/v1/endpoints/:name/rotate-secret', { config: { roles: WRITE } }, async (req) => {
    const { name } = parse(endpointParams, req.params, 'params');
    const body = parse(rotateSecretBody, req.body ?? {}, 'body');
    const out = await rotateStoredSecret(store(), name, body, actorOf(req), svc.config);
    await svc.registry.refresh(true);
    return { name, ...out };
  });

  app.delete('/v1/endpoints/:name', { config: { roles: WRITE } }, async (req) => {
    const { name } = parse(endpointParams, req.params, 'params');
    const q = parse(deleteEndpointQuery, req.query, 'query');
    parse(emptyBody, req.body, 'body');
    const { cancelled_jobs } = await deleteStoredEndpoint(store(false), name, q.force ?? false, actorOf(req));
    await svc.registry.refresh(true);
    return { name, deleted: true, cancelled_jobs };
  });

  app.post('/v1/endpoints/:name/test', { config: { roles: ADMIN } }, async (req, reply) => {
    const { name } = parse(endpointParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    return reply.code(202).send(await testEndpoint(svc, name, principalOf(req).name));
  });

  // 200 with the endpoint's view either way; `changed: false` when there was nothing to do.
  const stateChange = (fn: typeof pauseEndpoint) => async (req: FastifyRequest) => {
    const { name } = parse(endpointParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    const { changed } = await fn(ctx(), name, principalOf(req).name);
    return { ...(await endpointView(svc.db.pool, svc.endpoints, name, local())), changed };
  };
  app.post('/v1/endpoints/:name/pause', { config: { roles: ADMIN } }, stateChange(pauseEndpoint));
  app.post('/v1/endpoints/:name/resume', { config: { roles: ADMIN } }, stateChange(resumeEndpoint));
}
