/**
 * acw-webhooks as a library: the transactional outbox (`notify`, `notifyMany`) for applications,
 * and the service's building blocks for embedding it (queue, worker pool, periodic runners).
 */
export { PermanentError, UsageError } from './errors.js';
export { WorkerPool, makeWorkerId, type JobHandler, type JobContext, type WorkerPoolOptions } from './queue/worker.js';
export { enqueueJobs, claimJobs, renewLeases, completeJobs, failJobs, releaseJobs } from './queue/transitions.js';
export { backoffDelay, type RetryPolicy } from './queue/backoff.js';
export type { ClaimedJob, NewJob, JobOutcome, AttemptRecord, DeadJob, DeadHook, JobStatus } from './queue/types.js';
export { Scheduler, claimRunnerTurn, type PeriodicRunner, type RunnerContext } from './runners/scheduler.js';
export { jobReaper, reapExpiredJobs } from './runners/reaper.js';
export { jobPurge, purgeOld } from './runners/purge.js';
export { migrate } from './db/migrate.js';
export { createPool } from './db/pool.js';
export { channels } from './db/sql.js';
export { createLogger } from './log.js';
export { notify, notifyMany, OutboxError, type OutboxDb, type OutboxEvent, type OutboxOptions } from './outbox.js';
export { Service, type ServiceOptions } from './service.js';
export { loadConfig, parseConfig, ConfigError, type Config } from './config/index.js';
