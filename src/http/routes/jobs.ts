import type { FastifyInstance } from 'fastify';
import { cancelJob, getJob, listJobs, redriveJobs, retryJob } from '../../admin/jobs.js';
import { listBlockedKeys, retryHead, skipHead } from '../../admin/ordering.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { ApiError } from '../../errors.js';
import { route } from '../route.js';

/** Jobs: list, show, and the operator actions retry, cancel and redrive (each audited). */
export function jobRoutes(app: FastifyInstance, svc: Service): void {
  const pool = svc.db.pool;
  // Disabled in the config or through the API: the registry knows both (held jobs say so).
  const disabled = (): Set<string> => new Set(svc.endpoints.filter((e) => !e.enabled).map((e) => e.name));

  route(app, 'listJobs', async ({ query }) => listJobs(pool, query, disabled()));

  route(app, 'getJob', async ({ params: { id } }) => {
    const job = await getJob(pool, id, disabled());
    if (!job) throw new ApiError(404, 'not_found', `id: no job ${id}`, { field: 'id' });
    return job;
  });

  route(app, 'retryJob', async ({ params: { id } }, req) => retryJob(pool, id, principalOf(req).name, svc.channels.jobs, disabled()));

  route(app, 'cancelJob', async ({ params: { id } }, req) => cancelJob(pool, id, principalOf(req).name, svc.channels.jobs));

  route(app, 'listBlockedKeys', async ({ query }) => listBlockedKeys(pool, query));
  route(app, 'retryKeyHead', async ({ body }, req) =>
    retryHead(pool, body.endpoint, body.ordering_key, principalOf(req).name, svc.channels.jobs),
  );
  route(app, 'skipKeyHead', async ({ body }, req) =>
    skipHead(pool, body.endpoint, body.ordering_key, principalOf(req).name, svc.channels.jobs),
  );

  route(app, 'redriveJobs', async ({ body: f }, req) => {
    const { count } = await redriveJobs(pool, f, principalOf(req).name, svc.channels.jobs);
    return f.dry_run ? { count, dry_run: true as const } : { count };
  });
}
