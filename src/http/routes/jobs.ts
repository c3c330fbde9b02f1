import type { FastifyInstance } from 'fastify';
import { cancelJob, getJob, listJobs, redriveJobs, retryJob } from '../../admin/jobs.js';
import type { Service } from '../../service.js';
import { ADMIN, principalOf, READ } from '../auth.js';
import { ApiError } from '../../errors.js';
import { emptyBody, emptyQuery, jobIdParams, jobsListQuery, parse, redriveBody } from '../schemas.js';

/** Jobs: list, show, and the operator actions retry, cancel and redrive (each audited). */
export function jobRoutes(app: FastifyInstance, svc: Service): void {
  const pool = svc.db.pool;

  app.get('/v1/jobs', { config: { roles: READ } }, async (req) => listJobs(pool, parse(jobsListQuery, req.query, 'query')));

  app.get('/v1/jobs/:id', { config: { roles: READ } }, async (req) => {
    const { id } = parse(jobIdParams, req.params, 'params');
    parse(emptyQuery, req.query, 'query');
    const job = await getJob(pool, id);
    if (!job) throw new ApiError(404, 'not_found', `id: no job ${id}`, { field: 'id' });
    return job;
  });

  app.post('/v1/jobs/:id/retry', { config: { roles: ADMIN } }, async (req) => {
    const { id } = parse(jobIdParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    return retryJob(pool, id, principalOf(req).name, svc.channels.jobs);
  });

  app.post('/v1/jobs/:id/cancel', { config: { roles: ADMIN } }, async (req) => {
    const { id } = parse(jobIdParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    return cancelJob(pool, id, principalOf(req).name);
  });

  app.post('/v1/jobs/redrive', { config: { roles: ADMIN } }, async (req) => {
    const f = parse(redriveBody, req.body, 'body');
    const { count } = await redriveJobs(pool, f, principalOf(req).name, svc.channels.jobs);
    return f.dry_run ? { count, dry_run: true } : { count };
  });
}
