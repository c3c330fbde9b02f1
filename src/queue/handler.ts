import type { Logger } from '../log.js';
import type { ClaimedJob, JobOutcome } from './types.js';

/** What a job type's code sees and promises: the contract between the queue and a handler. */

export interface JobContext {
  /** Aborted when the lease is lost or the shutdown grace ran out: stop and return. */
  signal: AbortSignal;
  log: Logger;
}

/**
 * A job type's handler, the public way to run work on the queue: return to complete, throw
 * PermanentError to send the job to dead at once, throw anything else to retry it with back-off.
 */
export type JobHandler = (job: ClaimedJob, ctx: JobContext) => Promise<void>;

/**
 * Internal: a handler that reports what its run came to as a JobOutcome instead of throwing. Only
 * the webhook handler is one (its outcome carries the attempt row, written in the same statement);
 * the outcome object is not part of the public API.
 */
export type OutcomeHandler = (job: ClaimedJob, ctx: JobContext) => Promise<JobOutcome | void>;
