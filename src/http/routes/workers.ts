import type { FastifyInstance } from 'fastify';
import { listProcesses } from '../../admin/processes.js';
import type { Service } from '../../service.js';
import { route } from '../route.js';

/**
 * `GET /v1/workers` (docs/operations.md#processes): every registered `serve` and `worker` process,
 * newest seen first, those not seen for three beats marked `gone`.
 */
export function workerRoutes(app: FastifyInstance, svc: Service): void {
  route(app, 'listProcesses', async () => listProcesses(svc.db.pool));
}
