import type { FastifyInstance } from 'fastify';
import { replayEndpoint, type ReplayContext } from '../../admin/replay.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { route } from '../route.js';

/** Replay of one endpoint's window (docs/operations.md#replaying-an-endpoint). */
export function replayRoutes(app: FastifyInstance, svc: Service): void {
  const ctx = (): ReplayContext => ({
    pool: svc.db.pool,
    endpoints: svc.endpoints,
    purge: svc.config.jobs.job_purge,
    maxAttempts: svc.config.jobs.max_attempts,
    jobsChannel: svc.channels.jobs,
    log: svc.log,
  });
  route(app, 'replayEndpoint', async ({ params: { name }, body }, req) => replayEndpoint(ctx(), name, body, principalOf(req).name));
}
