import type pg from 'pg';
import type { ListenHub } from '../db/listen-hub.js';
import type { Logger } from '../log.js';
import type { RetryPolicy } from './backoff.js';
import type { EndpointGate } from './endpoint-gate.js';
import type { Finished } from './flusher.js';
import type { JobHandler, OutcomeHandler } from './handler.js';
import type { DeadHook } from './types.js';

/**
 * How a WorkerPool is set up: its database, its handlers, its budgets and its hooks. Its view of
 * endpoints (caps, held endpoints, rates, and the outcomes it tells) is the endpoint gate's members,
 * each optional (endpoint-gate.ts).
 */
export interface WorkerPoolOptions extends Partial<EndpointGate> {
  pool: pg.Pool;
  /** For a LISTEN connection of its own, when no `listenHub` is given. */
  url: string;
  /** NOTIFY channel that enqueuers signal. */
  channel: string;
  /** The process's LISTEN connection to share (a Service gives its own); absent: the pool opens one of its own. */
  listenHub?: ListenHub;
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
  log?: Logger;
  workerId?: string;
  /** Called with every outcome once written, for metrics. */
  onFinished?: (f: Finished, changed: boolean, nextRunAt: Date | undefined) => void;
}
