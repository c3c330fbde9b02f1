import type { JobOutcome } from '../queue/types.js';

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
