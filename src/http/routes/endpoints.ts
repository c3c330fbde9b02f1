import type { FastifyInstance, FastifyRequest } from 'fastify';
import { pauseEndpoint, resumeEndpoint, type EndpointStateContext } from '../../admin/endpoint-state.js';
import { endpointHealth, endpointView, testEndpoint, type LocalDeliveries } from '../../admin/endpoints.js';
import type { Service } from '../../service.js';
import { ADMIN, principalOf, READ } from '../auth.js';
import { emptyBody, endpointParams, endpointsQuery, parse } from '../schemas.js';

/** Endpoints with their whitelist, shared state and recent health; pause, resume, and a `webhook.test` event to one of them. */
export function endpointRoutes(app: FastifyInstance, svc: Service): void {
  // This process's adaptive limits and in-flight deliveries (none without workers: jobs.enabled false).
  const local = (): LocalDeliveries => {
    const workers = svc.workers;
    return { caps: () => svc.limits.caps(), ...(workers ? { inFlightFor: (name: string) => workers.inFlightFor(name) } : {}) };
  };
  const ctx = (): EndpointStateContext => ({ pool: svc.db.pool, endpoints: svc.endpoints, channel: svc.channels.endpoints, log: svc.log });

  app.get('/v1/endpoints', { config: { roles: READ } }, async (req) => {
    const q = parse(endpointsQuery, req.query, 'query');
    return { items: await endpointHealth(svc.db.pool, svc.endpoints, q.window_minutes, local()) };
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
