import type { FastifyInstance } from 'fastify';
import { listProcesses } from '../../admin/processes.js';
import type { Service } from '../../service.js';
import { READ } from '../auth.js';
import { emptyQuery, parse } from '../schemas.js';

/**
 * `GET /v1/workers` (docs/operations.md#processes): every registered `serve` and `worker` process,
 * newest seen first, those not seen for three beats marked `gone`.
 */
export function workerRoutes(app: FastifyInstance, svc: Service): void {
  app.get('/v1/workers', { config: { roles: READ } }, async (req) => {
    parse(emptyQuery, req.query, 'query');
    return listProcesses(svc.db.pool);
  });
}
