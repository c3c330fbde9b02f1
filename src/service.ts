import type { Dispatcher } from 'undici';
import { APP_RUNNERS, configWarnings, maskConfig, runnerConfig, type AppRunnerConfig, type Config, type Endpoint } from './config/index.js';
import { openDatabase, type Database } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { ListenHub, type Subscription } from './db/listen-hub.js';
import { channels } from './db/sql.js';
import { silentLogger, type Logger } from './log.js';
import { ApiError, UsageError, coerceError } from './errors.js';
import { Metrics } from './metrics.js';
import type { FanOutContext } from './notify/fan-out.js';
import { OutboxPump } from './notify/outbox-pump.js';
import { TopicCatalog } from './topics/catalog.js';
import { reportMismatch } from './topics/check.js';
import { syncConfigTopics } from './topics/store.js';
import { jobExpiry } from './runners/expiry.js';
import { jobPurge } from './runners/purge.js';
import { jobQueueAnalyze } from './runners/queue-analyze.js';
import { jobReaper } from './runners/reaper.js';
import { ensureDaysAhead, historyPartitions } from './history/partitions.js';
import { statsRollup } from './history/stats-rollup.js';
import { historyUpgrade } from './history/upgrade.js';
import { Scheduler, type PeriodicRunner } from './runners/scheduler.js';
import { enqueueJobs } from './queue/transitions.js';
import type { DeadHook, NewJob } from './queue/types.js';
import { makeWorkerId, type JobHandler, type WorkerPool } from './queue/worker.js';
import { DeliveryLoop } from './delivery/loop.js';
import { AdaptiveLimits } from './endpoint-state/adaptive-limits.js';
import type { EndpointStates } from './endpoint-state/endpoint-states.js';
import { EndpointRegistry } from './endpoints/registry.js';
import { codecOf, type SecretCodec } from './endpoints/store.js';
import { loadSecretBox } from './crypto/keys.js';
import { SsrfGuard, type HostLookup } from './net/ssrf.js';
import { deadLetterHook } from './webhook/dead-letter.js';
import { AlertSinks } from './sinks/outlet.js';
import { WEBHOOK_JOB } from './webhook/job.js';
import { bootstrapUsers } from './users.js';
import { principalOfTokenHash } from './admin/users.js';
import { TokenCache, type TokenCacheOptions } from './admin/token-cache.js';
import { ProcessRegistration } from './admin/processes.js';
import { startTracing, stopTracing } from './tracing/runtime.js';

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
 * The running parts of one process: the database, the endpoint registry, and (unless
 * `jobs.enabled: false`) the outbox pump, the delivery loop (src/delivery/loop.ts: claims, sends,
 * outcomes) and the periodic runners. The HTTP server sits on top of it.
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
  /** This process's one LISTEN connection, every wake-up channel on it (docs/operations.md#deployment). */
  readonly listenHub: ListenHub;
  /** The webhook delivery loop, and the application's own job types on the same pool; null with jobs off. */
  delivery: DeliveryLoop | null = null;
  outboxPump: OutboxPump | null = null;
  /** The endpoints delivered to: the config file's, and those stored through the API, followed live. */
  readonly registry: EndpointRegistry;
  /** The topic catalog events are validated against (docs/operations.md#topic-catalog), followed live. */
  readonly topics: TopicCatalog;
  /** Opens and seals stored endpoints' secrets; null without an encryption key (stored endpoints then wait). */
  readonly secretCodec: SecretCodec | null;
  /** Checks the URLs of endpoints created through the API (docs/operations.md#ssrf-guard). */
  readonly ssrfGuard: SsrfGuard;
  /** Each endpoint's in-flight limit in this process: max_in_flight, lowered while it fails (fed by the delivery loop). */
  readonly limits: AdaptiveLimits;
  private readonly httpAgent: Dispatcher | undefined;
  /** How delivery sockets resolve names (tests inject one); default: the system resolver. */
  private readonly hostLookup: HostLookup | undefined;
  private stopping: Promise<void> | null = null;
  private stoppingWork: Promise<void> | null = null;
  private tokens: TokenCache | null = null;
  private tokensListener: Promise<Subscription> | null = null;
  private readonly tokenCacheOptions: TokenCacheOptions;
  private registration: ProcessRegistration | null = null;

  private constructor(opts: ServiceOptions, db: Database) {
    this.config = opts.config;
    this.log = opts.log ?? silentLogger;
    this.db = db;
    this.channels = channels(opts.config.database.schema);
    this.listenHub = new ListenHub({ url: db.url, log: this.log });
    this.secretCodec = opts.secretCodec ?? null;
    this.ssrfGuard = new SsrfGuard({ allowNetworks: opts.config.notify.webhook.allow_networks, lookup: opts.hostLookup });
    this.registry = new EndpointRegistry({
      pool: db.pool,
      listenHub: this.listenHub,
      channel: this.channels.endpointDefs,
      config: opts.config,
      codec: this.secretCodec,
      log: this.log,
    });
    this.topics = new TopicCatalog({
      pool: db.pool,
      listenHub: this.listenHub,
      channel: this.channels.topics,
      config: opts.config,
      log: this.log,
    });
    this.tokenCacheOptions = opts.tokenCache ?? {};
    this.limits = new AdaptiveLimits({ endpoints: () => this.registry.byName, log: this.log });
    this.httpAgent = opts.httpAgent;
    this.hostLookup = opts.hostLookup;
    const cfg = opts.config;
    this.fanOutContext = {
      endpoints: () => this.registry.endpoints,
      webhooksEnabled: () => cfg.notify.webhook.enabled,
      maxAttempts: cfg.jobs.max_attempts,
      jobsChannel: this.channels.jobs,
      log: this.log,
      adopter: () => this.workers,
      topics: () => this.topics,
      onSchemaMismatch: (topic, mode, problems) => reportMismatch(this.log, topic, mode, problems, this.metrics),
    };
    this.metrics = new Metrics({ pool: db.pool, log: this.log, inFlight: () => this.workers?.inFlight ?? 0 });
    // The per-endpoint gauges: this process's endpoints, and its workers where it has them.
    this.metrics.watchEndpoints({
      endpoints: () => [...this.registry.byName.values()],
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
   * The HTTP auth's token cache, subscribed to revokes on the first call (processes that serve no
   * authenticated route do not listen for them). A NOTIFY names the user whose tokens to forget;
   * after a reconnect, what was missed is unknown, so everything goes.
   */
  tokenCache(): TokenCache {
    if (this.tokens) return this.tokens;
    const cache = new TokenCache((hash) => principalOfTokenHash(this.db.pool, hash), this.tokenCacheOptions);
    this.tokens = cache;
    // It never throws: a failed connect is retried in the background, the TTL bounding staleness
    // meanwhile. After stop() it is a no-op (the hub is closed).
    this.tokensListener = this.listenHub.subscribe(this.channels.users, {
      onNotify: (name) => (name ? cache.evictUser(name) : cache.clear()),
      onReconnect: () => cache.clear(),
    });
    return cache;
  }

  get endpoints(): readonly Endpoint[] {
    return this.registry.endpoints;
  }

  /** The worker pool of the delivery loop; null with jobs off. */
  get workers(): WorkerPool | null {
    return this.delivery?.workers ?? null;
  }

  /** The shared endpoint state as this process takes part in it (circuit breaker, pause, rate limits); null with jobs off. */
  get endpointStates(): EndpointStates | null {
    return this.delivery?.states ?? null;
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
    logConfig(cfg, log, opts.runners ?? []);
    await startTracing(this, cfg, log);
    if (cfg.database.migrate) await migrate(this.db.pool, { schema: cfg.database.schema, log });
    await bootstrapUsers(this.db.pool, cfg.server.auth.users, log);
    // Finished jobs need today's partition of job_history (the history_partitions runner keeps the
    // days ahead made). Not fatal here: a database that is not migrated yet, or not reachable, is
    // what /readyz reports, and the runner tries again.
    await ensureDaysAhead(this.db.pool).catch((err: unknown) => {
      log.warn(
        { event: 'history.partitions_error', err: coerceError(err).message },
        'could not make the day partitions of job history yet',
      );
    });
    // Every process, workers or not: the API writes endpoints and POST /v1/notify fans out to them.
    await this.registry.start();
    await this.startTopics();
    if (!cfg.jobs.enabled) {
      log.info({ event: 'jobs.disabled' }, 'jobs.enabled is false: no outbox pump, scheduler or workers');
      return;
    }
    // Alerts reach the sinks through the queue (docs/operations.md#alert-sinks), written with each alert.
    const alertSinks = AlertSinks.fromConfig(cfg, this.channels.jobs);
    const onDead = deadLetterHook(this.channels.alerts, alertSinks);
    for (const r of periodicRunners(cfg, { channels: this.channels, onDead, alertSinks, metrics: this.metrics }, opts.runners ?? [])) {
      this.scheduler.register(r);
    }
    this.outboxPump = new OutboxPump({
      pool: this.db.pool,
      listenHub: this.listenHub,
      channel: this.channels.events,
      pollMs: cfg.jobs.poll_interval,
      ctx: this.fanOutContext,
      log,
      onFannedOut: (topic, n) => this.metrics.jobsEnqueued(WEBHOOK_JOB, topic, n),
      screen: { alertsChannel: this.channels.alerts, sinks: alertSinks, log, metrics: this.metrics },
    });
    this.delivery = new DeliveryLoop({
      config: cfg,
      pool: this.db.pool,
      url: this.db.url,
      listenHub: this.listenHub,
      channels: this.channels,
      endpoints: () => this.registry.byName,
      limits: this.limits,
      httpAgent: this.httpAgent,
      hostLookup: this.hostLookup,
      handlers: opts.handlers,
      onDead,
      alertSinks,
      metrics: this.metrics,
      log,
    });
    // The delivery loop first: the outbox pump hands jobs to its workers from its first batch on.
    await this.delivery.start();
    await this.outboxPump.start();
    this.scheduler.start();
  }

  /**
   * The config's topics written to the catalog (a schema that does not compile stops the start,
   * naming its key), then the catalog followed. A database not readable yet is retried by the poll.
   */
  private async startTopics(): Promise<void> {
    try {
      await syncConfigTopics({ pool: this.db.pool, channel: this.channels.topics }, this.config);
    } catch (err) {
      if (err instanceof ApiError) throw new UsageError(err.message);
      this.log.warn({ event: 'topics.read_error', err: coerceError(err).message }, 'the topic catalog cannot be written yet');
    }
    await this.topics.start();
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
    this.stoppingWork ??= Promise.all([this.outboxPump?.stop(), this.scheduler.stop(), this.delivery?.stop()]).then(() => undefined);
    return this.stoppingWork;
  }

  /** stopWork(), then close the delivery pools and the database (stopping an embedded server we started). */
  async stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.stopWork();
      await this.registration?.stop();
      await this.registry.stop();
      await this.topics.stop();
      await this.delivery?.close();
      this.tokens?.close();
      await (await this.tokensListener)?.close();
      // Every subscriber has left by now; the connection goes before the database (an embedded server may stop).
      await this.listenHub.close();
      await this.db.close();
      // Last: the spans of the deliveries that finished above are exported.
      await stopTracing(this);
    })();
    return this.stopping;
  }
}

/** The effective configuration, its warnings, and an application runner's block that no registered runner takes. */
function logConfig(cfg: Config, log: Logger, runners: readonly PeriodicRunner[]): void {
  log.info({ event: 'service.config', config: maskConfig(cfg) }, 'effective configuration');
  for (const w of configWarnings(cfg)) log.warn({ event: 'config.warning', warning: w }, w);
  for (const name of APP_RUNNERS) {
    if (runnerConfig(cfg, name) === undefined || runners.some((r) => r.name === name)) continue;
    const w = `jobs.${name}: no runner named "${name}" is registered, so nothing runs it; an application that embeds the service registers one with Service.start({ runners: [{ name: '${name}', intervalMs, cluster, run }] }) (docs/integrate.md#periodic-runners)`;
    log.warn({ event: 'config.warning', key: `jobs.${name}`, warning: w }, w);
  }
}

/** Our periodic runners as configured (reaper, purge, partitions, counter rollup, upgrade, expiry of held jobs, job_queue's analyze as it grows), then the host's with their `jobs.<name>` blocks. */
function periodicRunners(
  cfg: Config,
  ctx: { channels: ReturnType<typeof channels>; onDead: DeadHook; alertSinks: AlertSinks | null; metrics: Metrics },
  hostRunners: readonly PeriodicRunner[],
): PeriodicRunner[] {
  const j = cfg.jobs;
  return [
    ...(j.job_reaper.enabled
      ? [
          jobReaper({
            intervalMs: j.job_reaper.interval,
            channel: ctx.channels.jobs,
            onDead: ctx.onDead,
            onReaped: (rows) => ctx.metrics.jobsReaped(rows),
          }),
        ]
      : []),
    ...(j.job_purge.enabled
      ? [
          jobPurge({
            intervalMs: j.job_purge.interval,
            completedRetentionMs: j.job_purge.completed_retention,
            deadRetentionMs: j.job_purge.dead_retention,
            successBodyRetentionMs: j.job_purge.success_body_retention,
            auditRetentionMs: j.job_purge.audit_retention,
            notificationRetentionMs: j.job_purge.notification_retention,
            maxJobAgeMs: cfg.notify.webhook.max_age,
            idempotencyRetentionMs: cfg.notify.idempotency_retention,
            batchSize: j.job_purge.batch_size,
          }),
        ]
      : []),
    historyPartitions(),
    statsRollup(),
    historyUpgrade({
      retentions: { completedMs: j.job_purge.completed_retention, deadMs: j.job_purge.dead_retention },
      jobsChannel: ctx.channels.jobs,
    }),
    jobExpiry({
      maxAgeMs: cfg.notify.webhook.max_age,
      alertsChannel: ctx.channels.alerts,
      jobsChannel: ctx.channels.jobs,
      alertSinks: ctx.alertSinks,
      onExpired: (rows) => ctx.metrics.jobsExpired(rows),
    }),
    jobQueueAnalyze(),
    ...hostRunners.flatMap((runner) => withRunnerConfig(runner, runnerConfig(cfg, runner.name))),
  ];
}

/** A host runner with its `jobs.<name>` block: `enabled: false` drops it, `interval` overrides its own, the block reaches `run` as `ctx.config`. */
function withRunnerConfig(r: PeriodicRunner, block: AppRunnerConfig | undefined): PeriodicRunner[] {
  if (block === undefined) return [r];
  if (!block.enabled) return [];
  return [{ ...r, intervalMs: block.interval ?? r.intervalMs, run: (ctx) => r.run({ ...ctx, config: block }) }];
}
