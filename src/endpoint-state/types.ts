import type { Config } from '../config/index.js';

/**
 * The words of endpoint state (docs/operations.md#circuit-breaker), shared by every file of this
 * folder and by the operator's reads: one `endpoint_state` row per endpoint, shared by every process.
 */

/** The circuit breaker's state of one endpoint: closed delivers, open holds its jobs, half_open runs one probe. */
export type CircuitState = 'closed' | 'open' | 'half_open';

/** `notify.webhook.circuit`. */
export type CircuitConfig = Config['notify']['webhook']['circuit'];

/** One endpoint's shared state as this process last read it (times on this process's clock). */
export interface CachedState {
  circuit: CircuitState;
  paused: boolean;
  nextProbeAt: number | null;
  probeDeadline: number | null;
  openedAt: number | null;
  openAlertId: number | null;
}

/** Does this cached state hold the endpoint's jobs (paused, or a circuit not closed)? */
export function isHolding(s: CachedState | undefined): boolean {
  return s !== undefined && (s.paused || s.circuit !== 'closed');
}
