import type pg from 'pg';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { HELD_JOBS_CAP, readEndpointStates, type EndpointStateView } from './endpoint-state/health.js';
import type { Endpoint } from './config/index.js';
import { coerceError } from './errors.js';
import { silentLogger, type Logger } from './log.js';
import type { Finished } from './queue/flusher.js';

/**
 * Prometheus metrics of one service (its own Registry, so several services in one process do not
 * collide). Counters move through callbacks from the worker pool, reaper and scheduler; the queue
 * gauges are read at scrape time from the due-jobs partial index, never by counting the table.
 */
export interface MetricsOptions {
  pool: pg.Pool;
  /** Jobs running in this process now. */
  inFlight?: () => number;
  log?: Logger;
  /** Queue depth is counted up to this many due jobs (a bounded read of the index). */
  depthCap?: number;
  /** A scrape gives up on the database after this long and reports no queue gauges. */
  queryTimeoutMs?: number;
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

function topicOf(payload: unknown): string {
  const t = (payload as { topic?: unknown } | null)?.topic;
  return typeof t === 'string' ? t : '';
}

export function statusClass(code: number | null): string {
  return code !== null && code >= 200 && code < 600 ? `${Math.floor(code / 100)}xx` : 'error';
}

/** Where the per-endpoint gauges come from (Metrics.watchEndpoints). */
export interface EndpointMetricsSource {
  endpoints: () => readonly Endpoint[];
  /** This process's deliveries running now, per endpoint (absent: no workers here). */
  inFlightFor?: (endpoint: string) => number;
  /** This process's adaptive in-flight limits. */
  caps?: () => ReadonlyMap<string, number>;
}

const CIRCUIT_STATES = ['closed', 'half_open', 'open'] as const;

interface QueueSnapshot {
  depth: number;
  oldestAgeSeconds: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly enqueued: Counter<'type' | 'topic'>;
  private readonly completed: Counter<'type' | 'topic'>;
  private readonly retried: Counter<'type' | 'topic'>;
  private readonly dead: Counter<'type' | 'topic'>;
  private readonly deliveries: Counter<'endpoint' | 'status_class'>;
  private readonly duration: Histogram<'endpoint'>;
  private readonly leaseLost: Counter;
  private readonly schemaMismatches: Counter<'topic' | 'mode'>;
  private readonly reaped: Counter<'status'>;
  private readonly runnerErrors: Counter<'runner'>;
  private readonly depth: Gauge;
  private readonly oldestAge: Gauge;
  private readonly inFlight: Gauge;
  private readonly endpointInFlight: Gauge<'endpoint'>;
  private readonly adaptiveLimit: Gauge<'endpoint'>;
  private snapshot: { at: number; value: Promise<QueueSnapshot | null> } | null = null;
  private endpointSnapshot: { at: number; value: Promise<Map<string, EndpointStateView> | null> } | null = null;
  private endpointSource: EndpointMetricsSource | null = null;
  private readonly log: Logger;

  constructor(private readonly opts: MetricsOptions) {
    this.log = opts.log ?? silentLogger;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const jobCounter = (name: string, help: string) => new Counter({ name, help, labelNames: ['type', 'topic'] as const, registers });
    this.enqueued = jobCounter('acw_jobs_enqueued_total', 'Jobs enqueued, by job type and event topic');
    this.completed = jobCounter('acw_jobs_completed_total', 'Jobs completed');
    this.retried = jobCounter('acw_jobs_retried_total', 'Failed attempts scheduled for another try');
    this.dead = jobCounter(
      'acw_jobs_dead_total',
      'Jobs that went dead (any path: permanent answer, attempts spent, reaped, parked, expired)',
    );
    this.deliveries = new Counter({
      name: 'acw_webhook_deliveries_total',
      help: 'Webhook HTTP attempts by endpoint and status class (2xx, 3xx, 4xx, 5xx, error)',
      labelNames: ['endpoint', 'status_class'] as const,
      registers,
    });
    this.duration = new Histogram({
      name: 'acw_webhook_delivery_duration_seconds',
      help: 'Webhook HTTP attempt duration',
      labelNames: ['endpoint'] as const,
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.schemaMismatches = new Counter({
      name: 'acw_topic_schema_mismatches_total',
      help: "Events whose data did not match their topic's schema, by the mode that applied (warn: accepted; enforce: refused)",
      labelNames: ['topic', 'mode'],
      registers,
    });
    this.leaseLost = new Counter({
      name: 'acw_job_lease_lost_total',
      help: 'Job outcomes not written because the lease was lost',
      registers,
    });
    this.reaped = new Counter({
      name: 'acw_jobs_reaped_total',
      help: 'Running jobs whose lease expired, by new status',
      labelNames: ['status'] as const,
      registers,
    });
    this.runnerErrors = new Counter({
      name: 'acw_runner_errors_total',
      help: 'Periodic runner failures',
      labelNames: ['runner'] as const,
      registers,
    });
    this.depth = new Gauge({
      name: 'acw_queue_depth',
      help: `Pending jobs due now (counted up to ${this.depthCap})`,
      registers,
      collect: async () => {
        const s = await this.queueSnapshot();
        if (s) this.depth.set(s.depth);
        else this.depth.reset();
      },
    });
    this.oldestAge = new Gauge({
      name: 'acw_queue_oldest_due_age_seconds',
      help: 'How long the oldest due pending job has been waiting (0 when none is due)',
      registers,
      collect: async () => {
        const s = await this.queueSnapshot();
        if (s) this.oldestAge.set(s.oldestAgeSeconds);
        else this.oldestAge.reset();
      },
    });
    this.inFlight = new Gauge({
      name: 'acw_jobs_in_flight',
      help: 'Jobs running in this process',
      registers,
      collect: () => this.inFlight.set(opts.inFlight?.() ?? 0),
    });
    // Endpoint state is shared through the database, so every process reports the same values
    // (aggregate with max); one bounded read per scrape feeds the four gauges below.
    const stateGauge = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      fill: (g: Gauge<L>, ep: string, st: EndpointStateView) => void,
    ) => {
      const g: Gauge<L> = new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect: async () => {
          const states = await this.endpointStates();
          g.reset();
          if (states) for (const [ep, st] of states) fill(g, ep, st);
        },
      });
      return g;
    };
    // A state set (one series per state, 1 for the current one), as Prometheus exposes enums: alerts
    // and dashboards select by label (state="open") instead of decoding magic numbers.
    stateGauge(
      'acw_endpoint_circuit_state',
      'Circuit breaker state per endpoint: 1 for the current state (closed, half_open, open), 0 for the others',
      ['endpoint', 'state'] as const,
      (g, endpoint, st) => {
        for (const state of CIRCUIT_STATES) g.set({ endpoint, state }, st.circuit === state ? 1 : 0);
      },
    );
    stateGauge('acw_endpoint_paused', 'Endpoint paused by hand (1) or not (0)', ['endpoint'] as const, (g, endpoint, st) =>
      g.set({ endpoint }, st.paused ? 1 : 0),
    );
    stateGauge(
      'acw_endpoint_failing',
      'Endpoint failing (1): at least half its recent deliveries refused permanently (4xx); 0 otherwise',
      ['endpoint'] as const,
      (g, endpoint, st) => g.set({ endpoint }, st.failing ? 1 : 0),
    );
    stateGauge(
      'acw_endpoint_held_jobs',
      `Due pending jobs held back because the endpoint is open, half-open, paused or disabled (counted up to ${HELD_JOBS_CAP})`,
      ['endpoint'] as const,
      (g, endpoint, st) => g.set({ endpoint }, st.held_jobs),
    );
    // Per process, from memory: no database read.
    this.endpointInFlight = new Gauge({
      name: 'acw_endpoint_in_flight',
      help: 'Deliveries to the endpoint running in this process',
      labelNames: ['endpoint'] as const,
      registers,
      collect: () => {
        this.endpointInFlight.reset();
        const src = this.endpointSource;
        if (!src?.inFlightFor) return;
        for (const e of src.endpoints()) this.endpointInFlight.set({ endpoint: e.name }, src.inFlightFor(e.name));
      },
    });
    this.adaptiveLimit = new Gauge({
      name: 'acw_endpoint_adaptive_limit',
      help: "The endpoint's in-flight limit in this process: max_in_flight, lowered while it fails",
      labelNames: ['endpoint'] as const,
      registers,
      collect: () => {
        this.adaptiveLimit.reset();
        const caps = this.endpointSource?.caps?.();
        if (caps) for (const [endpoint, cap] of caps) this.adaptiveLimit.set({ endpoint }, cap);
      },
    });
  }

  /** Report per-endpoint gauges for these endpoints (until then they have no series). */
  watchEndpoints(source: EndpointMetricsSource): void {
    this.endpointSource = source;
  }

  private get depthCap(): number {
    return this.opts.depthCap ?? 100_000;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** An event whose data did not match its topic's schema (docs/operations.md#topic-catalog). */
  schemaMismatch(topic: string, mode: string): void {
    this.schemaMismatches.inc({ topic, mode });
  }

  jobsEnqueued(type: string, topic: string, n = 1): void {
    if (n > 0) this.enqueued.inc({ type, topic }, n);
  }

  /** The worker pool's onFinished: every outcome once written (changed false: the lease was lost). */
  jobFinished(f: Finished, changed: boolean, nextRunAt: Date | undefined): void {
    const labels = { type: f.job.type, topic: topicOf(f.job.payload) };
    const a = f.outcome.attempt;
    if (a) {
      const endpoint = a.endpoint ?? f.job.endpoint ?? '';
      this.deliveries.inc({ endpoint, status_class: statusClass(a.statusCode) });
      this.duration.observe({ endpoint }, a.durationMs / 1000);
    }
    if (!changed) {
      this.leaseLost.inc();
      return;
    }
    const o = f.outcome;
    if (o.kind === 'complete') this.completed.inc(labels);
    else if (o.kind === 'release') {
      // The flusher turns a release of a job whose endpoint was unknown past its limit into dead; same test here.
      const unknownSince = f.job.endpointUnknownSince;
      if (o.park && unknownSince && Date.now() - unknownSince.getTime() >= o.park.deadAfterMs) this.dead.inc(labels);
    } else if (nextRunAt) this.retried.inc(labels);
    else this.dead.inc(labels);
  }

  /** The reaper's report: expired leases handed back (pending) or out of attempts (dead). */
  jobsReaped(jobs: ReadonlyArray<{ type: string; payload: unknown; status: string }>): void {
    for (const j of jobs) {
      this.reaped.inc({ status: j.status });
      if (j.status === 'dead') this.dead.inc({ type: j.type, topic: topicOf(j.payload) });
    }
  }

  /** The expiry sweep's report: held jobs past notify.webhook.max_age, all dead. */
  jobsExpired(jobs: ReadonlyArray<{ type: string; payload: unknown }>): void {
    for (const j of jobs) this.dead.inc({ type: j.type, topic: topicOf(j.payload) });
  }

  runnerError(runner: string): void {
    this.runnerErrors.inc({ runner });
  }

  /** One bounded read of the due index per scrape, shared by both queue gauges. */
  private queueSnapshot(): Promise<QueueSnapshot | null> {
    const now = Date.now();
    if (this.snapshot && now - this.snapshot.at < 1_000) return this.snapshot.value;
    const value = this.readQueue();
    this.snapshot = { at: now, value };
    return value;
  }

  /** The endpoints' shared state, read at most once a second however many gauges ask. */
  private endpointStates(): Promise<Map<string, EndpointStateView> | null> {
    const src = this.endpointSource;
    if (!src) return Promise.resolve(null);
    const now = Date.now();
    if (this.endpointSnapshot && now - this.endpointSnapshot.at < 1_000) return this.endpointSnapshot.value;
    const value = this.bounded('endpoint gauges', readEndpointStates(this.opts.pool, src.endpoints())).catch((err: unknown) => {
      this.log.warn({ event: 'metrics.endpoint_error', err: coerceError(err).message }, 'endpoint gauges unavailable for this scrape');
      return null;
    });
    this.endpointSnapshot = { at: now, value };
    return value;
  }

  /** A scrape waits for the database at most queryTimeoutMs. */
  private async bounded<T>(what: string, p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: database did not answer in time`)), this.opts.queryTimeoutMs ?? 2_000);
    });
    try {
      return await Promise.race([p, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async readQueue(): Promise<QueueSnapshot | null> {
    try {
      const res = await this.bounded(
        'queue gauges',
        this.opts.pool.query<{ depth: number; age: number | null }>({
          name: 'acw_metrics_queue',
          text: `select
            (select count(*)::int from (select 1 from job_queue where status = 'pending' and run_at <= now() limit $1) d) as depth,
            (select extract(epoch from now() - run_at)::float8 from job_queue
              where status = 'pending' and run_at <= now() order by run_at, id limit 1) as age`,
          values: [this.depthCap],
        }),
      );
      const row = res.rows[0];
      return { depth: row?.depth ?? 0, oldestAgeSeconds: Math.max(0, row?.age ?? 0) };
    } catch (err) {
      this.log.warn({ event: 'metrics.queue_error', err: coerceError(err).message }, 'queue gauges unavailable for this scrape');
      return null;
    }
  }
}
