import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isPrintable } from '../../admin/params.js';
import { replayEndpoint, type ReplayContext } from '../../admin/replay.js';
import type { Service } from '../../service.js';
import { ADMIN, principalOf } from '../auth.js';
import { endpointParams, parse } from '../schemas.js';

/** `since`, `until` and `status` are checked by admin/replay.ts, the same checks as the CLI's. */
export const replayBody = z.strictObject({
  since: z.string({ error: 'required: an RFC 3339 time or a duration like "2h"' }).max(64),
  until: z.string().max(64).optional(),
  status: z.string().max(64).optional(),
  dry_run: z.boolean({ error: 'expected true or false' }).optional(),
  idempotency_key: z.string().min(1).max(200).refine(isPrintable, 'expected printable characters').optional(),
});

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
  app.post('/v1/endpoints/:name/replay', { config: { roles: ADMIN } }, async (req) => {
    const { name } = parse(endpointParams, req.params, 'params');
    const body = parse(replayBody, req.body ?? {}, 'body');
    return replayEndpoint(ctx(), name, body, principalOf(req).name);
  });
}
