import type pg from 'pg';
import type { Logger } from '../log.js';
import type { RetryPolicy } from './backoff.js';
import type { Finished } from './flusher.js';
import type { JobHandler, OutcomeHandler } from './handler.js';
import type { ClaimedJob, DeadHook, JobOutcome } from './types.js';

/** How a WorkerPool is set up: its database, its handlers, its budgets and its hooks. */
export interface WorkerPoolOptions {
  pool: pg.Pool;
  /** For the LISTEN connection of its own. */
  url: string;
  /** NOTIFY channel that enqueuers signal. */
  channel: string;
  /** Handlers by job type; more can be added with registerHandler() before start(). */
  handlers: Record<string, JobHandler | OutcomeHandler>;
  /** Jobs with no endpoint (application handlers) in flight at once: `jobs.workers`. */
  concurrency: number;
  /**
   * Webhook deliveries (jobs with an endpoint) in flight at once, a budget apart from
   * `concurrency` (`notify.webhook.max_in_flight_total`). Absent: they share `concurrency`.
   */
  deliveries?: number;
  leaseMs: number;
  pollMs: number;
  shutdownGraceMs: number;
  retry: RetryPolicy;
  onDead?: DeadHook;
  /** Per-endpoint concurrency caps for this process (max_in_flight, lowered while failing), read at every claim. */
  endpointLimits?: () => ReadonlyMap<string, number>;
  /** Endpoints whose cap is below their max_in_flight: together they hold at most half the delivery budget. */
  degraded?: (endpoint: string) => boolean;
  /** Endpoints whose jobs wait as this process knows (open circuit, paused, disabled): not offered in claims, no claim on dispatch. */
  held?: (endpoint: string) => boolean;
  /** Rate limits (deliveries/s across all processes) per endpoint; the claim spends their tokens. */
  rates?: () => ReadonlyMap<string, number>;
  /** Told each outcome the moment a handler returns, before it is written (the adaptive limits). */
  onOutcome?: (job: ClaimedJob, outcome: JobOutcome) => void;
  log?: Logger;
  workerId?: string;
  /** Called with every outcome once written, for metrics. */
  onFinished?: (f: Finished, changed: boolean, nextRunAt: Date | undefined) => void;
}
