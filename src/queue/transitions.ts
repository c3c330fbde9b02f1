/**
 * Every change to a job's status, one exported function per transition of the state machine in
 * docs/operations.md#job-states. This module, with its files under transitions/, is the only code
 * that writes `jobs` (the purge runner's delete of old finished jobs aside;
 * test/queue/transitions-home.test.ts holds that), so that a
 * rule such as "attempts spent -> dead" or "a real attempt clears the skip columns" is written
 * once, and a new column or transition is one change here (the probe claim, expiry, an endpoint's
 * force-delete and replay live here too).
 *
 * After the claim, every write is guarded by id + lease_token + status 'running', so a worker that
 * lost its lease changes nothing; the attempt rows (attempt-rows.ts) go in the outcome's statement.
 * Batches go through arrays (`unnest`); the fragments the statements share are in job-rows.ts.
 * The hot-path statements are prepared (`name`) and were tuned (bench/README.md): change their
 * text only with a measurement.
 */

// The statements, by concern, are in transitions/: claims.ts (claim, probe claim), inserts.ts,
// outcomes.ts (renew, complete, fail, release), sweeps.ts (unpark, reap, expiry) and operator.ts
// (retry, cancel, force-delete, redrive, replay). Callers import them from here.

export { claimJobs, claimProbes } from './transitions/claims.js';
export { enqueueJobs, insertJobs, insertWithJobs, isExistingJob, type WithJobs } from './transitions/inserts.js';
export { completeJobs, failJobs, releaseJobs, renewLeases } from './transitions/outcomes.js';
export {
  advanceKeys,
  finishKeyedJobs,
  insertKeyedJobs,
  lockKeys,
  requeueKeyed,
  type Advanced,
  type FinishedKeyed,
  type KeyRef,
} from './transitions/ordering.js';
export { expireHeldJobs, reapJobs, unparkJobs } from './transitions/sweeps.js';
export { cancelEndpointJobs, operatorCancelJob, operatorRedriveJobs, operatorRetryJob, replayJobs } from './transitions/operator.js';
export type {
  ClaimOptions,
  ExpiredRow,
  ExpiryCursor,
  FailItem,
  FailResult,
  LeaseOptions,
  InsertedJobs,
  ReleaseItem,
} from './transition-types.js';
