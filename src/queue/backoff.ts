import { doubling } from '../delay.js';
import type { JobOutcome } from './types.js';

/**
 * Capped exponential back-off with jitter: min(base * 2^(attempt-1), max), then +/- jitter.
 * `attempt` is the attempt that just failed (1 for the first). `random` is injectable for tests.
 */
export interface RetryPolicy {
  base: number;
  max: number;
  jitter: number;
}

export function backoffDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const exp = doubling(policy.base, attempt - 1, policy.max);
  const spread = exp * policy.jitter;
  return Math.max(0, Math.round(exp - spread + random() * 2 * spread));
}

/** How long a job waits after this outcome of attempt `attempt`: a retry's back-off, a release's own delay. */
export function outcomeDelay(policy: RetryPolicy, attempt: number, out: JobOutcome): number {
  if (out.kind === 'release') return out.delayMs;
  if (out.kind !== 'retry') return 0;
  const schedule = backoffDelay(policy, attempt);
  // Retry-After is honoured but never earlier than the schedule and never past retry.max.
  if (out.retryAfterMs !== undefined) return Math.max(schedule, Math.min(out.retryAfterMs, policy.max));
  return schedule;
}
