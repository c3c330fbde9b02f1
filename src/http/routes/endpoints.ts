import type { FastifyInstance } from 'fastify';
import { endpointHealth, testEndpoint } from '../../admin/endpoints.js';
import type { Service } from '../../service.js';
import { ADMIN, principalOf, READ } from '../auth.js';
import { emptyBody, endpointParams, endpointsQuery, parse } from '../schemas.js';

/** Endpoints with their whitelist and recent health; a `webhook.test` event to one of them. */
export function endpointRoutes(app: FastifyInstance, svc: Service): void {
  app.get('/v1/endpoints', { config: { roles: READ } }, async (req) => {
    const q = parse(endpointsQuery, req.query, 'query');
    return { items: await endpointHealth(svc.db.pool, svc.endpoints, q.window_minutes) };
  });

  app.post('/v1/endpoints/:name/test', { config: { roles: ADMIN } }, async (req, reply) => {
    const { name } = parse(endpointParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    return reply.code(202).send(await testEndpoint(svc, name, principalOf(req).name));
  });
}
