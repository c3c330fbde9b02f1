import type { ClaimedJob, JobOutcome } from './types.js';

/**
 * What the worker pool asks about endpoints, and what it tells: its only view of endpoint state.
 * src/endpoint-state/gate.ts makes one from the circuit breaker, pause, rate and adaptive limits;
 * the queue imports nothing from there. A pool without one (an application's own job types) treats
 * every endpoint as open and uncapped. The claim statement checks the shared state itself as well
 * (transitions/claims.ts), so every process obeys a circuit or a pause that this one has not read yet.
 */
export interface EndpointGate {
  /** Each endpoint's cap in this process now (its max_in_flight, lowered while it fails), read at every claim. */
  endpointLimits: () => ReadonlyMap<string, number>;
  /** Is its cap below its max_in_flight (it has been failing)? Together such endpoints hold at most half the delivery budget. */
  degraded: (endpoint: string) => boolean;
  /** Must its jobs wait now (open circuit, paused, disabled)? Then it is offered no slot in a claim and no claim on dispatch. */
  held: (endpoint: string) => boolean;
  /** Rate limits per endpoint (deliveries/s across all processes): the claim spends their tokens; never claimed on dispatch. */
  rates: () => ReadonlyMap<string, number>;
  /** Here is an outcome: told the moment a handler returns, before it is written. */
  onOutcome: (job: ClaimedJob, outcome: JobOutcome) => void;
}
