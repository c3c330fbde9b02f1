import type { Config } from '../config/index.js';

/**
 * The words of endpoint state (docs/operations.md#circuit-breaker), shared by every file of this
 * folder and by the operator's reads: one `endpoint_state` row per endpoint, shared by every process.
 */

/** The circuit breaker's state of one endpoint: closed delivers, open holds its jobs, half_open runs one probe. */
export type CircuitState = 'closed' | 'open' | 'half_open';

/** `notify.webhook.circuit`. */
export type CircuitConfig = Config['notify']['webhook']['circuit'];
