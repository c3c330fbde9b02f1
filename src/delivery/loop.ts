import type pg from 'pg';
import type { Dispatcher } from 'undici';
import type { Config, Endpoint } from '../config/index.js';
import type { ListenHub } from '../db/listen-hub.js';
import type { channels } from '../db/sql.js';
import type { AdaptiveLimits } from '../endpoint-state/adaptive-limits.js';
import { EndpointStates } from '../endpoint-state/endpoint-states.js';
import { endpointGate } from '../endpoint-state/gate.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Finished } from '../queue/flusher.js';
import { unparkJobs } from '../queue/transitions.js';
import type { DeadHook } from '../queue/types.js';
import { WorkerPool, type JobHandler, type OutcomeHandler } from '../queue/worker.js';
import { EndpointAgents } from '../webhook/agents.js';
import type { HostLookup } from '../net/ssrf.js';
import type { AlertSinks } from '../sinks/outlet.js';
import { createDeliverHandler, logAttempt } from '../webhook/deliver.js';
import { WEBHOOK_JOB } from '../webhook/job.js';

export interface DeliveryLoopOptions {
  config: Config;
  pool: pg.Pool;
  /** The database URL (the worker pool's; it listens on `listenHub` rather than on a connection of its own). */
  url: string;
  /** The process's LISTEN connection: jobs and endpoint state subscribe to it. */
  listenHub: ListenHub;
  channels: ReturnType<typeof channels>;
  /** The endpoints in force now (the registry's), read at every claim and every attempt. */
  endpoints: () => ReadonlyMap<string, Endpoint>;
  /** This process's adaptive limits, which the outcomes feed (the service keeps them: its reads show them with jobs off too). */
  limits: AdaptiveLimits;
  /** One HTTP agent for every endpoint's attempts (tests pass a MockAgent); absent: a pool per endpoint. */
  httpAgent?: Dispatcher | undefined;
  /** How the per-endpoint pools resolve names (tests inject one). */
  hostLookup?: HostLookup | undefined;
  /** The embedding application's own job types, run by the same pool (no endpoint, no gate). */
  handlers?: Record<string, JobHandler> | undefined;
  /** Runs in the transaction that sends jobs to dead (the dead letter). */
  onDead: DeadHook;
  /** Where alerts go besides the API (docs/operations.md#alert-sinks). */
  alertSinks?: AlertSinks | null | undefined;
  metrics: Metrics;
  log: Logger;
}

/**
 * The webhook delivery loop of one process, from claim to written outcome
 * (docs/architecture.md#one-notify-from-request-to-delivery). Its seams, in the order a delivery
 * meets them:
 *
 * 1. Claim. The worker pool (src/queue/worker.ts) claims due jobs in batches, offering each endpoint
 *    the slots its endpoint gate allows (src/endpoint-state/gate.ts: caps, held endpoints, rates;
 *    the statement is claimJobs in src/queue/transitions/claims.ts). Jobs also arrive claimed on
 *    dispatch (the fan-out's Handover, src/queue/handover.ts) and as the circuit breaker's probes
 *    (EndpointStates, claimProbes).
 * 2. Send. The `webhook.deliver` handler (send(), src/webhook/deliver.ts) signs the body (the
 *    job's own, or made from its event, read with the claim) and POSTs it once through the
 *    endpoint's own pool; what came of it is a JobOutcome carrying its attempt row.
 * 3. Outcome. The gate hears it first (onOutcome: the adaptive limit and the circuit breaker),
 *    then the pool's Flusher writes it in batches with its attempt row (completeJobs, failJobs,
 *    releaseJobs in src/queue/transitions/outcomes.ts), and once written it is logged and counted
 *    (written()).
 */
export class DeliveryLoop {
  readonly workers: WorkerPool;
  /** The shared endpoint state as this process takes part in it (circuit breaker, pause, rate limits). */
  readonly states: EndpointStates;
  /** The per-endpoint pools (null when `httpAgent` was given), closed by close(). */
  private readonly agents: EndpointAgents | null;
  /** The endpoint's HTTP agent for an attempt: its own pool, or `httpAgent` when one was given. */
  private readonly agentFor: (ep: Endpoint) => Dispatcher;

  constructor(private readonly opts: DeliveryLoopOptions) {
    const { config: cfg, log } = opts;
    const j = cfg.jobs;
    const shared = opts.httpAgent;
    if (shared) {
      this.agents = null;
      this.agentFor = () => shared;
    } else {
      const agents = new EndpointAgents({ lookup: opts.hostLookup });
      this.agents = agents;
      this.agentFor = (ep) => agents.agentFor(ep);
    }
    this.states = new EndpointStates({
      pool: opts.pool,
      listenHub: opts.listenHub,
      channel: opts.channels.endpoints,
      alertsChannel: opts.channels.alerts,
      alertSinks: opts.alertSinks,
      circuit: cfg.notify.webhook.circuit,
      endpoints: opts.endpoints,
      log,
    });
    this.workers = new WorkerPool({
      pool: opts.pool,
      url: opts.url,
      listenHub: opts.listenHub,
      channel: opts.channels.jobs,
      handlers: { ...opts.handlers, [WEBHOOK_JOB]: this.send() },
      concurrency: j.workers,
      deliveries: cfg.notify.webhook.max_in_flight_total,
      leaseMs: j.job_reaper.lease_timeout,
      pollMs: j.poll_interval,
      shutdownGraceMs: j.shutdown_grace,
      retry: j.retry,
      onDead: opts.onDead,
      ...endpointGate(this.states, opts.limits),
      log,
      onFinished: (f, changed, next) => this.written(f, changed, next),
    });
  }

  /** 2. Send: the `webhook.deliver` handler, with the endpoint's HTTP agent for each attempt. */
  private send(): OutcomeHandler {
    const cfg = this.opts.config;
    return createDeliverHandler({
      endpoints: this.opts.endpoints,
      agentFor: this.agentFor,
      isProbe: (id) => this.states.isProbe(id),
      recheckMs: Math.min(cfg.jobs.retry.base, 60_000),
      recheckMaxMs: cfg.jobs.retry.max,
      log: this.opts.log,
    });
  }

  /** 3. Outcome, once written: one `webhook.attempt` line, and the metrics. */
  private written(f: Finished, changed: boolean, next: Date | undefined): void {
    logAttempt(this.opts.log, f, changed, next);
    this.opts.metrics.jobFinished(f, changed, next);
  }

  /**
   * Make the jobs skipped while their endpoint was unknown or disabled due now, start the pool, then
   * the endpoint state: the claim reads the shared state itself, and the cache (for claim on
   * dispatch) is filled before the caller starts the outbox pump.
   */
  async start(): Promise<void> {
    const { config: cfg, log } = this.opts;
    const back = [...this.opts.endpoints().values()].filter((e) => e.enabled).map((e) => e.name);
    if (back.length > 0 && cfg.notify.webhook.enabled) {
      const woken = await unparkJobs(this.opts.pool, back);
      if (woken > 0) log.info({ event: 'jobs.unparked', jobs: woken }, 'jobs skipped for endpoints that are enabled now are due again');
    }
    await this.workers.start();
    await this.states.start(this.workers);
  }

  /** Stop claiming, let in-flight deliveries finish within the grace, then write what the endpoint state still holds. */
  async stop(): Promise<void> {
    await this.workers.stop();
    await this.states.stop();
  }

  /** Close the per-endpoint HTTP pools, once nothing sends any more. */
  async close(): Promise<void> {
    await this.agents?.close();
  }
}
