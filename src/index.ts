/**
 * acw-webhooks as a library: the API an application may build on, kept stable across releases and
 * documented in README.md#embedding. Everything else under dist/ (the queue's statements, the slot
 * accounting, the fan-out) is internal and may change in any release.
 *
 * - Notify from the application's own transaction: `notify`, `notifyMany` (the outbox).
 * - Run the service in-process, with the application's own job types and periodic runners:
 *   `Service.start({ config, handlers, runners })`, `service.enqueue(jobs)`.
 * - A bare worker pool for the application's own job types: `WorkerPool` with `registerHandler`,
 *   and the periodic runners beside it: `Scheduler`, with the `jobReaper` and `jobPurge` runners.
 * - Receivers, HTTP callers and tests have their own entry points: `acw-webhooks/verify`,
 *   `acw-webhooks/client`, `acw-webhooks/testing`.
 */
export {
  notify,
  notifyMany,
  OutboxError,
  type AnyTopics,
  type NotifyArgs,
  type OutboxDb,
  type OutboxEvent,
  type OutboxOptions,
} from './outbox.js';
export { Service, type ServiceOptions } from './service.js';
export { WorkerPool, type JobHandler, type JobContext, type WorkerPoolOptions } from './queue/worker.js';
export type { RetryPolicy } from './queue/backoff.js';
export type { ClaimedJob, NewJob, JobStatus } from './queue/types.js';
export { Scheduler, type PeriodicRunner, type RunnerContext } from './runners/scheduler.js';
export { jobReaper } from './runners/reaper.js';
export { jobPurge } from './runners/purge.js';
export { PermanentError } from './errors.js';
export { loadConfig, parseConfig, ConfigError, type Config } from './config/index.js';
export { migrate } from './db/migrate.js';
export { createPool } from './db/pool.js';
export { channels } from './db/sql.js';
export { createLogger, type Logger } from './log.js';
