import type { AttemptRecord, JobOutcome } from '../queue/types.js';

/**
 * What one finished attempt tells about its endpoint, for the two parts that learn from it: the
 * circuit breaker (shared by every process: is the receiver up?) and the adaptive limit (this
 * process: is the receiver keeping up?). The same answer counts differently for each: a 429 lowers
 * the limit but says the receiver is up.
 */

/** Error kinds that say the receiver is down or unreachable (docs/operations.md#circuit-breaker). */
const DOWN = new Set(['timeout', 'connect', 'dns', 'tls', 'protocol', 'network']);

/**
 * What one attempt tells the circuit breaker about its endpoint: `failure` for refused connections,
 * timeouts, DNS, TLS and protocol errors and 5xx; `success` for any other answer (2xx, and 3xx or
 * 4xx too: the receiver is up, it just refused this request); null for what says nothing about
 * the receiver being up: no attempt made, our own abort (shutdown, lost lease), a request we could
 * not build, and 429, which only lowers the adaptive limit.
 */
export function circuitSignal(outcome: JobOutcome): 'failure' | 'success' | null {
  const a = outcome.attempt;
  if (!a || a.aborted) return null;
  if (outcome.kind === 'complete') return 'success';
  if (a.errorKind !== null && DOWN.has(a.errorKind)) return 'failure';
  if (a.statusCode === null || a.statusCode === 429) return null;
  return a.statusCode >= 500 ? 'failure' : 'success';
}

/**
 * What one finished attempt tells the circuit breaker (circuitSignal), with one rule for probes: a
 * probe that got any answer (a 429 too) found the receiver up.
 */
export function attemptSignal(outcome: JobOutcome, probe: boolean): 'failure' | 'success' | null {
  const signal = circuitSignal(outcome);
  const a = outcome.attempt;
  if (probe && signal === null && a && !a.aborted && a.statusCode !== null) return 'success';
  return signal;
}

/** Error kinds that say the receiver is struggling or unreachable; 4xx, redirects and our own aborts do not. */
const CONGESTION = new Set(['timeout', 'connect', 'dns', 'tls', 'protocol', 'network']);

/** What one attempt tells about its endpoint's capacity: lower the limit, raise it, or neither. */
export function congestionSignal(outcome: JobOutcome): 'failure' | 'success' | null {
  const a: AttemptRecord | undefined = outcome.attempt;
  if (!a || a.aborted) return null;
  if (outcome.kind === 'complete') return 'success';
  if (a.errorKind !== null && CONGESTION.has(a.errorKind)) return 'failure';
  if (a.errorKind === 'http_status' && a.statusCode !== null && (a.statusCode >= 500 || a.statusCode === 429)) return 'failure';
  return null;
}
