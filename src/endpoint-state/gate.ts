import type { EndpointGate } from '../queue/endpoint-gate.js';
import { WEBHOOK_JOB } from '../webhook/job.js';
import type { AdaptiveLimits } from './adaptive-limits.js';
import type { EndpointStates } from './endpoint-states.js';

/**
 * The endpoint gate of this process's worker pool (src/queue/endpoint-gate.ts): the caps and the
 * degraded endpoints come from its adaptive limits; what is held (open, half-open, paused, disabled,
 * or tripped here) and the rate limits from the shared state; every webhook outcome feeds both.
 */
export function endpointGate(states: EndpointStates, limits: AdaptiveLimits): EndpointGate {
  return {
    endpointLimits: () => limits.caps(),
    degraded: (ep) => limits.isDegraded(ep),
    held: (ep) => states.isHeld(ep),
    rates: () => states.rates(),
    onOutcome: (job, out) => {
      if (job.endpoint === null || job.type !== WEBHOOK_JOB) return;
      limits.observe(job.endpoint, out);
      states.observe(job, out);
    },
  };
}
