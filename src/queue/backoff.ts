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
  const exp = Math.min(policy.base * 2 ** Math.max(attempt - 1, 0), policy.max);
  const spread = exp * policy.jitter;
  return Math.max(0, Math.round(exp - spread + random() * 2 * spread));
}
