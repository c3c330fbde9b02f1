/**
 * The configuration schema: the single source of every default and key's documentation.
 * Parsed keys keep their snake_case names; durations become milliseconds, sizes bytes.
 */
import { z } from 'zod';
import { show } from './errors.js';
import {
  bool,
  cidrs,
  databaseUrl,
  duration,
  encryptionKey,
  fraction,
  headers,
  httpUrl,
  jsonObject,
  instant,
  int,
  list,
  listen,
  oneOf,
  pattern,
  rateLimit,
  secretText,
  size,
  strict,
  text,
  topics,
} from './fields.js';
import {
  checkAlerts,
  checkAuth,
  checkCircuit,
  checkEndpoint,
  checkRetry,
  checkTopics,
  checkWebhook,
  isObject,
  type AddIssue,
} from './rules.js';
import { ROLES } from '../roles.js';
import { tracingSchema } from './tracing.js';

export { ROLES, type Role } from '../roles.js';

/** Cross-key rules run even when a sibling failed, so one pass reports every problem. */
function withRule<T extends z.ZodType>(schema: T, rule: (value: unknown, add: AddIssue) => void): T {
  return schema.superRefine((value, ctx) => rule(value, (path, message) => ctx.addIssue({ code: 'custom', path, message })), {
    when: (payload) => isObject(payload.value),
  });
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const SCHEMES = ['acw', 'standard'] as const;
/** What a dead head does to its ordering key (docs/operations.md#ordered-delivery). */
export const ORDERINGS = ['relaxed', 'strict'] as const;
/** How an alert sink's body is written (docs/operations.md#alert-sinks). */
export const SINK_FORMATS = ['webhook', 'slack'] as const;
/** How notify checks an event's data against its topic's schema (docs/operations.md#topic-catalog). */
export const VALIDATION_MODES = ['off', 'warn', 'enforce'] as const;

const user = strict({
  name: pattern(/^[A-Za-z0-9_.@-]{1,64}$/, 'a user name of 1-64 letters, digits or "_.@-"').describe('principal name'),
  role: oneOf(ROLES).describe('admin: everything; viewer: read; service: notify'),
  token: secretText().default('').describe('bearer token; stored hashed; empty: the user is skipped'),
});

const endpoint = withRule(
  strict({
    name: pattern(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'an endpoint name like "billing-hooks" (lowercase, digits, "_-")').describe(
      'unique endpoint name, used in jobs and the API',
    ),
    url: httpUrl().describe('http(s) URL the POST goes to'),
    secret: secretText().default('').describe('signing key (required); "whsec_<base64>" for scheme standard'),
    secret_next: secretText().optional().describe('rotation: the new key, signing alongside secret until rotate_until, then alone'),
    rotate_until: instant().optional().describe('rotation: end of the overlap (RFC 3339); after it only secret_next signs'),
    topics: topics()
      .default(() => [])
      .describe('whitelist: exact topics, "prefix.*" or "*"'),
    timeout: duration({ positive: true }).optional().describe('per-attempt timeout; default notify.webhook.timeout'),
    connect_timeout: duration({ positive: true })
      .optional()
      .describe('connect (TCP, TLS) timeout, at most timeout; default notify.webhook.connect_timeout'),
    max_in_flight: int(1, 10_000).optional().describe('concurrent deliveries per process; default notify.webhook.max_in_flight'),
    rate_limit: rateLimit()
      .optional()
      .describe('deliveries per second or minute across all processes, "20/s" or "600/min"; default notify.webhook.rate_limit'),
    scheme: oneOf(SCHEMES).default('acw').describe('acw: X-ACW-* headers; standard: Standard Webhooks headers'),
    ordering: oneOf(ORDERINGS)
      .default('relaxed')
      .describe("keyed events: relaxed lets a dead head's next event go; strict holds the key until an operator retries or skips it"),
    headers: headers()
      .default(() => ({}))
      .describe('extra request headers'),
    enabled: bool().default(true).describe('false: jobs for this endpoint wait (held, as when paused) instead of being sent'),
    ssrf_guard: bool()
      .default(false)
      .describe('true: refuse addresses outside global unicast, as for endpoints created through the API (see allow_networks)'),
    propagate_trace: bool()
      .optional()
      .describe('send traceparent/tracestate so the receiver continues the trace; default notify.webhook.propagate_trace'),
  }),
  checkEndpoint,
);

const circuit = withRule(
  strict({
    enabled: bool()
      .default(true)
      .describe(
        'false: endpoints that are down are never held (only retries and adaptive limits apply); failing ones are still judged and alerted',
      ),
    failure_threshold: int(1, 100_000).default(10).describe('consecutive failures that open the circuit'),
    failure_rate: fraction().default(0.5).describe('share of failures over `window` that opens it (with min_attempts)'),
    min_attempts: int(1, 100_000).default(20).describe('attempts within `window` before failure_rate applies'),
    window: duration({ positive: true }).prefault('1m').describe('window of the failure rate'),
    cooldown: duration({ positive: true }).prefault('10s').describe('first wait before a probe; doubles after each failed probe'),
    cooldown_max: duration({ positive: true })
      .prefault('30s')
      .describe('longest wait between probes: a down endpoint is probed at least this often (a probe spends no attempt)'),
    alert_after: duration()
      .prefault('30s')
      .describe('an endpoint open this long raises one alert (one for all its flaps), resolved once it stays closed'),
    resolve_after: duration()
      .prefault('30s')
      .describe('closed this long, an opened alert resolves; an endpoint that opens again sooner counts a flap of the same alert'),
  }),
  checkCircuit,
);

const webhook = withRule(
  strict({
    enabled: bool().default(true).describe('false: no job for any endpoint'),
    url: httpUrl({ optional: true }).default('').describe('the endpoint "default"; empty: none'),
    secret: secretText().default('').describe('required (non-empty) when url is set'),
    secret_next: secretText().optional().describe('rotation of the default endpoint: the new key (see endpoints[].secret_next)'),
    rotate_until: instant().optional().describe('rotation of the default endpoint: end of the overlap (RFC 3339)'),
    timeout: duration({ positive: true }).prefault('10s').describe('per-attempt timeout'),
    propagate_trace: bool()
      .default(false)
      .describe('with tracing on, send traceparent/tracestate on each POST (shows receivers your trace ids)'),
    // No schema default: unset means 5s or the endpoint's timeout when that is shorter (endpoints.ts),
    // so a config with a short timeout keeps working; a value given is refused above the timeout.
    connect_timeout: duration({ positive: true })
      .optional()
      .describe('connect (TCP, TLS) timeout, at most timeout; unset: 5s or timeout if shorter'),
    max_in_flight: int(1, 10_000).default(16).describe('per endpoint per process: one slow receiver cannot hold every delivery'),
    max_in_flight_total: int(1, 100_000)
      .default(2000)
      .describe('webhook deliveries in flight per process, all endpoints together; apart from jobs.workers'),
    rate_limit: rateLimit().prefault('').describe('default per-endpoint rate limit, "20/s" or "600/min"; empty: none'),
    circuit: circuit.prefault({}).describe('circuit breaker per endpoint, shared by every process'),
    max_age: duration({ positive: true }).prefault('72h').describe('a job held undelivered this long (from its latest series) goes dead'),
    service_endpoints: strict({
      topics: topics()
        .default(() => [])
        .describe('topic patterns a service token may subscribe its own endpoints to; empty: services create none'),
    })
      .prefault({})
      .describe('endpoints created through the API by role service'),
    topics: topics()
      .default(() => [])
      .describe('whitelist of the default endpoint'),
    scheme: oneOf(SCHEMES).default('acw').describe('signature scheme of the default endpoint'),
    ordering: oneOf(ORDERINGS).default('relaxed').describe('keyed events of the default endpoint (see endpoints[].ordering)'),
    headers: headers()
      .default(() => ({}))
      .describe('extra request headers of the default endpoint'),
    endpoints: list(endpoint)
      .default(() => [])
      .describe('more endpoints, each with its own secret'),
    allow_networks: cidrs()
      .default(() => [])
      .describe('CIDRs the SSRF guard lets through (internal receivers), e.g. ["10.20.0.0/16"]; empty: global unicast only'),
  }),
  checkWebhook,
);

/** One `alerts.sinks[]` entry: a target that gets every alert, delivered as a webhook job of its own endpoint. */
const sink = strict({
  name: pattern(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a sink name like "ops-pager" (lowercase, digits, "_-")').describe(
    'unique sink name; its deliveries are jobs of the endpoint "sink:NAME"',
  ),
  format: oneOf(SINK_FORMATS)
    .default('webhook')
    .describe('webhook: the alert as JSON, signed with X-ACW-* headers; slack: a Slack-compatible incoming-webhook body'),
  url: httpUrl().describe('http(s) URL the alert is POSTed to (for slack: the incoming-webhook URL, a secret itself)'),
  secret: secretText()
    .default('')
    .describe('signing key (required for format webhook); for slack, optional: set, the X-ACW-* signature is sent too'),
  headers: headers()
    .default(() => ({}))
    .describe('extra request headers'),
  timeout: duration({ positive: true }).optional().describe('per-attempt timeout; default notify.webhook.timeout'),
  max_in_flight: int(1, 100).default(2).describe('concurrent deliveries to this sink per process'),
  ssrf_guard: bool()
    .default(false)
    .describe('true: refuse addresses outside global unicast (see notify.webhook.allow_networks), as for endpoints'),
});

/** One `topics.catalog` entry: a topic declared in the file (written to the catalog at start). */
const topicDecl = strict({
  description: text().default('').describe('what the event means, for the receivers'),
  schema: jsonObject().describe("JSON Schema (draft 2020-12) of the event's data; a change adds a version"),
  examples: z
    .array(z.unknown())
    .default(() => [])
    .describe('example values of data, each matching the schema (the first is the dashboard\'s "send example")'),
  deprecated: bool().default(false).describe('true: still accepted, with a warning in each answer'),
  deprecation_note: text().default('').describe('what to use instead, shown with the warning'),
  validation: oneOf(VALIDATION_MODES).optional().describe("this topic's mode; default topics.validation"),
});

const topicsSection = withRule(
  strict({
    validation: oneOf(VALIDATION_MODES)
      .default('warn')
      .describe(
        "off: no check; warn: accepted, with warnings in the answer; enforce: refused (400) when data does not match its topic's schema",
      ),
    require_declared: bool().default(false).describe('true: a topic not in the catalog (or archived) is refused'),
    catalog: z
      .record(text(), topicDecl)
      .default(() => ({}))
      .describe('topics by name, each with its schema and examples; more can be added through /v1/topics'),
  }),
  checkTopics,
);

/**
 * The application runners the config knows by name (the host application's workspace fetch,
 * worktree prune and attachment cleanup): their `jobs:` blocks load as written and each is handed
 * to the runner of that name an embedding application registers (docs/integrate.md#periodic-runners).
 * Names the host registers are accepted the same way (LoadOptions.runners); any other key stays an error.
 */
export const APP_RUNNERS = ['workspace_fetch', 'worktree_prune', 'attachment_cleanup'] as const;

/** One application runner's block: `enabled` and `interval` are ours, every other key is the runner's own. */
export const appRunner = z.looseObject(
  {
    enabled: bool().default(true).describe('false: the runner of this name is not started'),
    interval: duration({ positive: true }).optional().describe("how often it runs; unset: the runner's own intervalMs"),
  },
  { error: (iss) => (iss.code === 'invalid_type' ? `expected a mapping, got ${show(iss.input)}` : undefined) },
);

const appRunnerKey = (name: string) =>
  appRunner.optional().describe(`handed to the application runner "${name}" with its other keys as written; no such runner: a warning`);

const jobs = strict({
  enabled: bool().default(true).describe('false: no dispatcher, scheduler or workers'),
  workers: int(1, 1000)
    .default(32)
    .describe('application job handlers in flight per process (webhook deliveries: notify.webhook.max_in_flight_total)'),
  shutdown_grace: duration().prefault('25s').describe('how long running jobs may finish at shutdown'),
  max_attempts: int(1, 100).default(6).describe('tries in total before a job goes dead'),
  poll_interval: duration({ positive: true }).prefault('2s').describe('fallback poll when no NOTIFY arrives'),
  retry: withRule(
    strict({
      base: duration().prefault('10s').describe('first retry delay'),
      max: duration().prefault('5m').describe('cap on any retry delay'),
      jitter: fraction().default(0.2).describe('delay varies by +/- this fraction'),
    }),
    checkRetry,
  )
    .prefault({})
    .describe('delay = min(base*2^(attempt-1), max) +/- jitter'),
  job_reaper: strict({
    enabled: bool().default(true).describe('return expired running jobs to pending'),
    interval: duration({ positive: true }).prefault('1m').describe('how often the reaper runs'),
    lease_timeout: duration({ positive: true }).prefault('5m').describe('a running job with no lease renewal this long is reaped'),
  })
    .prefault({})
    .describe('lease reaper'),
  job_purge: strict({
    enabled: bool().default(true).describe('delete old completed and dead jobs'),
    interval: duration({ positive: true }).prefault('24h').describe('how often the purge runs'),
    completed_retention: duration().prefault('168h').describe('keep completed jobs this long'),
    dead_retention: duration().prefault('720h').describe('keep dead and cancelled jobs this long'),
    success_body_retention: duration()
      .prefault('0s')
      .describe('keep the response body of 2xx attempts this long (whole days), then only the attempt; 0 keeps it as long as the attempt'),
    audit_retention: duration()
      .prefault('8760h')
      .describe('keep audit rows (dead letters, alerts, operator actions) this long; 0 keeps them forever'),
    notification_retention: duration()
      .prefault('2160h')
      .describe('keep unread in-app notifications this long (read ones go after dead_retention)'),
    batch_size: int(1, 100_000).default(1000).describe('rows deleted per statement'),
  })
    .prefault({})
    .describe('retention purge'),
  workspace_fetch: appRunnerKey('workspace_fetch'),
  worktree_prune: appRunnerKey('worktree_prune'),
  attachment_cleanup: appRunnerKey('attachment_cleanup'),
});

export const configSchema = strict({
  database: strict({
    url: databaseUrl().default('').describe('empty: embedded PostgreSQL under data_dir; DATABASE_URL overrides'),
    data_dir: text().min(1, { error: 'must not be empty' }).default('.acw').describe('embedded PostgreSQL data and state'),
    pool_size: int(1, 1000).default(10).describe('pooled connections per process'),
    migrate: bool().default(true).describe('apply pending migrations at start'),
    schema: pattern(/^[a-z_][a-z0-9_]*$/, 'a lowercase SQL identifier like "public"')
      .max(40, { error: (iss) => `must be at most 40 characters, got ${String(iss.input).length}` })
      .default('public')
      .describe('schema for every table, function and NOTIFY channel'),
  })
    .prefault({})
    .describe('PostgreSQL'),
  server: strict({
    listen: listen().default('127.0.0.1:8080').describe('HOST:PORT of the HTTP API'),
    max_body: size().prefault('1mb').describe('largest request body'),
    public_url: httpUrl({ optional: true })
      .default('')
      .describe(
        'the URL users open (behind a proxy); https: the session cookie is Secure; alert sinks link under it; empty: the listen address, and no links',
      ),
    session_ttl: duration({ positive: true }).prefault('12h').describe('how long a dashboard sign-in lasts'),
    auth: withRule(
      strict({
        users: list(user)
          .default(() => [])
          .describe('bootstrap principals, upserted at start'),
      }),
      checkAuth,
    )
      .prefault({})
      .describe('API principals'),
  })
    .prefault({})
    .describe('HTTP API'),
  log: strict({
    level: oneOf(LOG_LEVELS).default('info').describe('pino level'),
  })
    .prefault({})
    .describe('logging'),
  jobs: jobs.prefault({}).describe('queue, workers and periodic runners'),
  secrets: strict({
    encryption_key: encryptionKey()
      .default('')
      .describe('base64 of 32 bytes encrypting endpoint secrets at rest; unset: $ACW_ENCRYPTION_KEY, else a key file under data_dir'),
    old_encryption_keys: list(encryptionKey())
      .default(() => [])
      .describe('keys that only decrypt: what was stored before encryption_key changed'),
  })
    .prefault({})
    .describe('endpoint secrets at rest'),
  notify: strict({
    idempotency_retention: duration({ positive: true })
      .prefault('24h')
      .describe('an idempotency key deduplicates at least this long (and at most a day longer), then may be used again'),
    webhook: webhook.prefault({}).describe('outbound webhooks'),
  })
    .prefault({})
    .describe('notification channels'),
  topics: topicsSection.prefault({}).describe('the topic catalog and the validation of events against it'),
  alerts: withRule(
    strict({
      sinks: list(sink)
        .default(() => [])
        .describe('targets that get every alert and every resolution, through the queue (docs/operations.md#alert-sinks)'),
    }),
    checkAlerts,
  )
    .prefault({})
    .describe("where alerts go besides the API, the CLI and the admins' inbox"),
  tracing: tracingSchema
    .prefault({})
    .describe('OpenTelemetry traces over OTLP/HTTP (docs/operations.md#tracing); off unless an endpoint is set'),
});

/** Makes a parsed value read-only all the way down, as `loadConfig` freezes it. */
export type DeepReadonly<T> = T extends readonly (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** The parsed configuration as plain (mutable) data, e.g. a masked copy. */
export type ConfigData = z.output<typeof configSchema>;
/** The effective configuration: parsed once at start, frozen, passed down. */
export type Config = DeepReadonly<ConfigData>;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type Scheme = (typeof SCHEMES)[number];
export type Ordering = (typeof ORDERINGS)[number];
export type SinkFormat = (typeof SINK_FORMATS)[number];
export type ValidationMode = (typeof VALIDATION_MODES)[number];
/** A parsed application runner block: `interval` in milliseconds, the runner's own keys as written. */
export type AppRunnerConfig = Readonly<z.output<typeof appRunner>>;
