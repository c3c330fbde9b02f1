import type { Dispatcher } from 'undici';
import { APP_RUNNERS, configWarnings, maskConfig, runnerConfig, type AppRunnerConfig, type Config, type Endpoint } from './config/index.js';
import { openDatabase, type Database } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { Listener } from './db/listener.js';
import { channels } from './db/sql.js';
import { silentLogger, type Logger } from './log.js';
import { Metrics } from './metrics.js';
import type { FanOutContext } from './notify/fan-out.js';
import { OutboxPump } from './notify/outbox-pump.js';
import { jobExpiry } from './runners/expiry.js';
import { jobPurge } from './runners/purge.js';
import { jobReaper } from './runners/reaper.js';
import { Scheduler, type PeriodicRunner } from './runners/scheduler.js';
import { enqueueJobs, unparkJobs } from './queue/transitions.js';
import type { NewJob } from './queue/types.js';
import { WorkerPool, type JobHandler } from './queue/worker.js';
import { createDeliverHandler, logAttempt } from './webhook/deliver.js';
import { AdaptiveLimits } from './webhook/adaptive-limits.js';
import { EndpointStates } from './webhook/endpoint-state.js';
import { EndpointRegistry } from './endpoints/registry.js';
import { codecOf, type SecretCodec } from './endpoints/store.js';
import { loadSecretBox } from './crypto/keys.js';
import { SsrfGuard, type HostLookup } from './net/ssrf.js';
import { deadLetterHook } from './webhook/dead-letter.js';
import { WEBHOOK_JOB } from './webhook/job.js';
import { EndpointAgents } from './webhook/agents.js';
import { bootstrapUsers } from './users.js';
import { principalOfTokenHash } from './admin/users.js';
import { TokenCache, type TokenCacheOptions } from './admin/token-cache.js';
import { ProcessRegistration } from './admin/processes.js';
import { makeWorkerId } from './queue/worker.js';

export interface ServiceOptions {
  config: Config;
  log?: Logger;
  /** Extra job handlers and periodic runners of an embedding application. */
  handlers?: Record<string, JobHandler>;
  runners?: PeriodicRunner[];
  /** One HTTP agent for every endpoint's deliveries (an undici Dispatcher; tests pass a MockAgent). Default: a pool per endpoint. */
  httpAgent?: Dispatcher;
  /** An already open database (tests); otherwise opened from the config. */
  database?: Database;
  /** The HTTP auth's token cache (tests shorten or lengthen its TTL). */
  tokenCache?: TokenCacheOptions;
  /** Seals stored endpoints' secrets (default: from secrets.encryption_key, or the embedded server's key file). */
  secretCodec?: SecretCodec | null;
  /** How the process registry shows it (docs/operations.md#processes); an embedding application's is `worker`. */
  mode?: 'serve' | 'worker';
  /** Resolves endpoint host names for the SSRF guard (tests inject one); default: the system resolver. */
  hostLookup?: HostLookup;
}

/**
 * The running parts of one process: the database, and (unless `jobs.enabled: false`) the outbox
 * pump, the delivery workers and the periodic runners. The HTTP server sits on top of it.
 */
export class Service {
  readonly config: Config;
  readonly log: Logger;
  readonly db: Database;
  readonly channels: ReturnType<typeof channels>;
  readonly fanOutContext: FanOutContext;
  readonly scheduler: Scheduler;
  /** Prometheus metrics of this process, served on /metrics. */
  readonly metrics: Metrics;
  workers: WorkerPool | null = null;
  /** The shared endpoint state as this process takes part in it (circuit breaker, pause, rate limits); null with jobs off. */
  endpointStates: EndpointStates | null = null;
  outboxPump: OutboxPump | null = null;
  /** The endpoints delivered to: the config file's, and those stored through the API, followed live. */
  readonly registry: EndpointRegistry;
  /** Opens and seals stored endpoints' secrets; null without an encryption key (stored endpoints then wait). */
  readonly secretCodec: SecretCodec | null;
  /** Checks the URLs of endpoints created through the API (docs/operations.md#ssrf-guard). */
  readonly ssrfGuard: SsrfGuard;
  /** Each endpoint's in-flight limit in this process: max_in_flight, lowered while it fails. */
  readonly limits: AdaptiveLimits;
  /** The endpoint's HTTP agent for an attempt: its own pool, or `httpAgent` when one was given. */
  private readonly agentFor: (ep: Endpoint) => Dispatcher;
  /** The per-endpoint pools (null when `httpAgent` was given), closed at stop. */
  private readonly agents: EndpointAgents | null;
  private stopping: Promise<void> | null = null;
  private stoppingWork: Promise<void> | null = null;
  private tokens: TokenCache | null = null;
  private tokensListener: Listener | null = null;
  private readonly tokenCacheOptions: TokenCacheOptions;
  private registration: ProcessRegistration | null = null;

  private constructor(opts: ServiceOptions, db: Database) {
    this.config = opts.config;
    this.log = opts.log ?? silentLogger;
    this.db = db;
    this.channels = channels(opts.config.database.schema);
    this.secretCodec = opts.secretCodec ?? null;
    this.ssrfGuard = new SsrfGuard({ allowNetworks: opts.config.notify.webhook.allow_networks, lookup: opts.hostLookup });
    this.registry = new EndpointRegistry({
      pool: db.pool,
      url: db.url,
      channel: this.channels.endpointDefs,
      config: opts.config,
      codec: this.secretCodec,
      log: this.log,
    });
    this.tokenCacheOptions = opts.tokenCache ?? {};
    this.limits = new AdaptiveLimits({ endpoints: () => this.registry.byName, log: this.log });
    const shared = opts.httpAgent;
    if (shared) {
      this.agents = null;
      this.agentFor = () => shared;
    } else {
      const agents = new EndpointAgents({ lookup: opts.hostLookup });
      this.agents = agents;
      this.agentFor = (ep) => agents.agentFor(ep);
    }
    const cfg = opts.config;
    this.fanOutContext = {
      endpoints: () => this.registry.endpoints,
      webhooksEnabled: () => cfg.notify.webhook.enabled,
      maxAttempts: cfg.jobs.max_attempts,
      jobsChannel: this.channels.jobs,
      log: this.log,
      adopter: () => this.workers,
    };
    this.metrics = new Metrics({ pool: db.pool, log: this.log, inFlight: () => this.workers?.inFlight ?? 0 });
    // The per-endpoint gauges: this process's endpoints, and its workers where it has them.
    this.metrics.watchEndpoints({
      endpoints: () => this.registry.endpoints,
      inFlightFor: (name) => this.workers?.inFlightFor(name) ?? 0,
      caps: () => this.limits.caps(),
    });
    this.scheduler = new Scheduler({ pool: db.pool, log: this.log, onError: (name) => this.metrics.runnerError(name) });
  }

  /**
   * Queue jobs of the application's own types (run by the handlers given to start()); returns their
   * ids. Webhook deliveries come from notify, never from here.
   */
  async enqueue(jobs: readonly NewJob[]): Promise<string[]> {
    return enqueueJobs(this.db.pool, jobs, this.channels.jobs);
  }

  /**
   * The HTTP auth's token cache, with its revoke listener started on the first call (processes that
   * serve no authenticated route hold no LISTEN connection for it). A NOTIFY names the user whose
   * tokens to forget; after a reconnect, what was missed is unknown, so everything goes.
   */
  tokenCache(): TokenCache {
    if (this.tokens) return this.tokens;
    const cache = new TokenCache((hash) => principalOfTokenHash(this.db.pool, hash), this.tokenCacheOptions);
    this.tokens = cache;
    this.tokensListener = new Listener({
      url: this.db.url,
      channels: [this.channels.users],
      onNotify: (_channel, name) => (name ? cache.evictUser(name) : cache.clear()),
      onReconnect: () => cache.clear(),
      log: this.log,
    });
    // It never throws: a failed connect is retried in the background, the TTL bounding staleness meanwhile.
    if (this.stopping) void this.tokensListener.close();
    else void this.tokensListener.start();
    return cache;
  }

  get endpoints(): readonly Endpoint[] {
    return this.registry.endpoints;
  }

  static async start(opts: ServiceOptions): Promise<Service> {
    const log = opts.log ?? silentLogger;
    const db = opts.database ?? (await openDatabase(opts.config, log));
    // The key for stored endpoints' secrets: configured, or the embedded server's key file (created once).
    let secretCodec = opts.secretCodec;
    if (secretCodec === undefined) {
      try {
        secretCodec = codecOf(await loadSecretBox(opts.config, log));
      } catch (err) {
        await db.close();
        throw err;
      }
    }
    const svc = new Service({ ...opts, secretCodec }, db);
    try {
      await svc.boot(opts);
      await svc.register(opts.mode ?? 'worker');
    } catch (err) {
      await svc.stop();
      throw err;
    }
    return svc;
  }

  private async boot(opts: ServiceOptions): Promise<void> {
    const { config: cfg, log } = this;
    log.info({ event: 'service.config', config: maskConfig(cfg) }, 'effective configuration');
    for (const w of configWarnings(cfg)) log.warn({ event: 'config.warning', warning: w }, w);
    for (const name of APP_RUNNERS) {
      if (runnerConfig(cfg, name) === undefined || opts.runners?.some((r) => r.name === name)) continue;
      const w = `jobs.${name}: no runner named "${name}" is registered, so nothing runs it; an application that embeds the service registers one with Service.start({ runners: [{ name: '${name}', intervalMs, cluster, run }] }) (docs/integrate.md#periodic-runners)`;
      log.warn({ event: 'config.warning', key: `jobs.${name}`, warning: w }, w);
    }
    if (cfg.database.migrate) await migrate(this.db.pool, { schema: cfg.database.schema, log });
    await bootstrapUsers(this.db.pool, cfg.server.auth.users, log);
    // Every process, workers or not: the API writes endpoints and POST /v1/notify fans out to them.
    await this.registry.start();
    if (!cfg.jobs.enabled) {
      log.info({ event: 'jobs.disabled' }, 'jobs.enabled is false: no outbox pump, scheduler or workers');
      return;
    }
    const onDead = deadLetterHook(this.channels.alerts);
    const j = cfg.jobs;
    for (const r of [
      ...(j.job_reaper.enabled
        ? [
            jobReaper({
              intervalMs: j.job_reaper.interval,
              channel: this.channels.jobs,
              onDead,
              onReaped: (rows) => this.metrics.jobsReaped(rows),
            }),
          ]
        : []),
      ...(j.job_purge.enabled
        ? [
            jobPurge({
              intervalMs: j.job_purge.interval,
              completedRetentionMs: j.job_purge.completed_retention,
              deadRetentionMs: j.job_purge.dead_retention,
              batchSize: j.job_purge.batch_size,
            }),
          ]
        : []),
      jobExpiry({
        maxAgeMs: cfg.notify.webhook.max_age,
        alertsChannel: this.channels.alerts,
        onExpired: (rows) => this.metrics.jobsExpired(rows),
      }),
      ...(opts.runners ?? []).flatMap((runner) => withRunnerConfig(runner, runnerConfig(cfg, runner.name))),
    ]) {
      this.scheduler.register(r);
    }
    this.outboxPump = new OutboxPump({
      pool: this.db.pool,
      url: this.db.url,
      channel: this.channels.events,
      pollMs: j.poll_interval,
      ctx: this.fanOutContext,
      log,
      onFannedOut: (topic, n) => this.metrics.jobsEnqueued(WEBHOOK_JOB, topic, n),
    });
    const states = new EndpointStates({
      pool: this.db.pool,
      url: this.db.url,
      channel: this.channels.endpoints,
      alertsChannel: this.channels.alerts,
      circuit: cfg.notify.webhook.circuit,
      endpoints: () => this.registry.byName,
      log,
    });
    this.endpointStates = states;
    this.workers = new WorkerPool({
      pool: this.db.pool,
      url: this.db.url,
      channel: this.channels.jobs,
      handlers: {
        ...opts.handlers,
        [WEBHOOK_JOB]: createDeliverHandler({
          endpoints: () => this.registry.byName,
          agentFor: this.agentFor,
          isProbe: (id) => states.isProbe(id),
          recheckMs: Math.min(j.retry.base, 60_000),
          recheckMaxMs: j.retry.max,
          log,
        }),
      },
      concurrency: j.workers,
      deliveries: cfg.notify.webhook.max_in_flight_total,
      leaseMs: j.job_reaper.lease_timeout,
      pollMs: j.poll_interval,
      shutdownGraceMs: j.shutdown_grace,
      retry: j.retry,
      onDead,
      endpointLimits: () => this.limits.caps(),
      degraded: (ep) => this.limits.isDegraded(ep),
      held: (ep) => states.isHeld(ep),
      rates: () => states.rates(),
      onOutcome: (job, out) => {
        if (job.endpoint === null || job.type !== WEBHOOK_JOB) return;
        this.limits.observe(job.endpoint, out);
        states.observe(job, out);
      },
      log,
      onFinished: (f, changed, next) => {
        logAttempt(log, f, changed, next);
        this.metrics.jobFinished(f, changed, next);
      },
    });
    // Jobs skipped while their endpoint was unknown or disabled: due at once now that it is back.
    const back = this.registry.endpoints.filter((e) => e.enabled).map((e) => e.name);
    if (back.length > 0 && cfg.notify.webhook.enabled) {
      const woken = await unparkJobs(this.db.pool, back);
      if (woken > 0) log.info({ event: 'jobs.unparked', jobs: woken }, 'jobs skipped for endpoints that are enabled now are due again');
    }
    // Workers first: the outbox pump hands jobs to them from its first batch on. The claim reads the
    // endpoint state itself; the cache (for claim on dispatch) is filled before the pump starts.
    await this.workers.start();
    await states.start(this.workers);
    await this.outboxPump.start();
    this.scheduler.start();
  }

  /** Join the process registry: a row kept fresh until stop(), under the worker pool's id when there is one. */
  private async register(mode: 'serve' | 'worker'): Promise<void> {
    this.registration = new ProcessRegistration(
      this.db.pool,
      {
        id: this.workers?.workerId ?? makeWorkerId(),
        mode,
        jobs: this.config.jobs.enabled,
        inFlight: () => this.workers?.inFlight ?? 0,
        runners: () => (this.config.jobs.enabled ? this.scheduler.names : []),
      },
      this.log,
    );
    await this.registration.start();
  }

  /**
   * Stop all background work at once: claiming stops at the first moment, so the whole of
   * `shutdown_grace` goes to in-flight deliveries. The database stays open (for HTTP requests
   * still finishing) until stop().
   */
  async stopWork(): Promise<void> {
    this.stoppingWork ??= Promise.all([this.outboxPump?.stop(), this.scheduler.stop(), this.workers?.stop()])
      .then(() => this.endpointStates?.stop())
      .then(() => undefined);
    return this.stoppingWork;
  }

  /** stopWork(), then close the delivery pools and the database (stopping an embedded server we started). */
  async stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.stopWork();
      await this.registration?.stop();
      await this.registry.stop();
      await this.agents?.close();
      this.tokens?.close();
      await this.tokensListener?.close();
      await this.db.close();
    })();
    return this.stopping;
  }
}

/** A host runner with its `jobs.<name>` block: `enabled: false` drops it, `interval` overrides its own, the block reaches `run` as `ctx.config`. */
function withRunnerConfig(r: PeriodicRunner, block: AppRunnerConfig | undefined): PeriodicRunner[] {
  if (block === undefined) return [r];
  if (!block.enabled) return [];
  return [{ ...r, intervalMs: block.interval ?? r.intervalMs, run: (ctx) => r.run({ ...ctx, config: block }) }];
}
