import type { Config } from '../config/index.js';

/**
 * The words of endpoint state (docs/operations.md#circuit-breaker), shared by every file of this
 * folder and by the operator's reads: one `endpoint_state` row per endpoint, shared by every process.
 */

/** The circuit breaker's state of one endpoint: closed delivers, open holds its jobs, half_open runs one probe. */
export type CircuitState = 'closed' | 'open' | 'half_open';

/**
 * One word for an endpoint's state, the most pressing first: `disabled` (in config), `paused`,
 * `down` (its circuit is not closed), `failing` (at least half of its recent deliveries failed
 * permanently: docs/operations.md#failing-endpoints), else `healthy`.
 */
export const HEALTH_WORDS = ['disabled', 'paused', 'down', 'failing', 'healthy'] as const;
export type HealthWord = (typeof HEALTH_WORDS)[number];

/** `notify.webhook.circuit`. */
export type CircuitConfig = Config['notify']['webhook']['circuit'];

/** One endpoint's shared state as this process last read it (times on this process's clock). */
export interface CachedState {
  circuit: CircuitState;
  paused: boolean;
  nextProbeAt: number | null;
  probeDeadline: number | null;
  openedAt: number | null;
  /** When the circuit entered its state (a closed one: how long it has stayed closed). */
  circuitSince: number | null;
  openAlertId: number | null;
  /** Failing (docs/operations.md#failing-endpoints), and its alert if raised. */
  failing: boolean;
  failingAlertId: number | null;
}

/** Does this cached state hold the endpoint's jobs (paused, or a circuit not closed)? */
export function isHolding(s: CachedState | undefined): boolean {
  return s !== undefined && (s.paused || s.circuit !== 'closed');
}
