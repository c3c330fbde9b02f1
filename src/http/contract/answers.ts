/**
 * What the HTTP API answers, one zod schema per answer: the route registry (routes.ts) gives each
 * status of each route one of these; the server serializes through them (fast-json-stringify: a
 * field not in the schema is not sent), the OpenAPI document shows them, and `acw-webhooks/client`
 * and the dashboard take their types from them (`z.infer`, type-only imports: nothing of the server
 * enters their code). Free-form values (event data, a job's payload, an alert's details) are open.
 * A field that an older version stored in an answer it replays (a notify's or a replay's saved
 * answer) and that is no longer listed is dropped, never an error: only what every version stored is
 * required.
 */
import { z } from 'zod';
import { JOB_STATUSES } from '../../admin/job-view.js';
import { ALERT_ACTIONS } from '../../admin/alerts.js';
import { HEALTH_WORDS, type CircuitState } from '../../endpoint-state/types.js';
import { REPLAY_STATUSES } from '../../admin/replay.js';
import { ORDERINGS, SCHEMES } from '../../config/schema.js';
import type { JobStatus } from '../../queue/types.js';
import { ROLES } from '../../roles.js';

/** An instant as the API writes it: RFC 3339 in UTC with milliseconds (`toISOString`). */
const instant = z.iso.datetime();
/** Job and event ids: UUIDs of any version. */
const id = z.guid();
const count = z.int().min(0);

// ---- errors -------------------------------------------------------------------------------

/** Every error answer, whatever its status (docs/api.md#errors). */
export const errorAnswer = z.object({
  error: z.object({
    code: z.string().describe('machine-readable: `invalid_input`, `unknown_field`, `not_found`, `unauthorized`, …'),
    message: z.string().describe('for people; names the offending field first (`events[3].topic: …`)'),
    details: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('`field`: the field or header at fault; other members depend on the code'),
  }),
});

// ---- health and sessions ------------------------------------------------------------------

export const livenessAnswer = z.object({ status: z.literal('ok') });
export const readyAnswer = z.object({ status: z.literal('ready') });
export const notReadyAnswer = z.object({
  status: z.literal('not_ready'),
  reason: z.string(),
  pending: z.array(z.string()).optional().describe('migrations not applied yet'),
  unknown: z.array(z.int()).optional().describe('migrations applied that this version does not know'),
});

export const sessionAnswer = z.object({
  user: z.object({ name: z.string(), role: z.enum(ROLES) }),
  expires_at: instant.optional().describe('when the session cookie expires (absent for a bearer token)'),
});

// ---- notify -------------------------------------------------------------------------------

/** One event's answer, as stored with a keyed event (and replayed from there, `replayed` added). */
export const eventAnswer = z.object({
  event_id: id,
  job_ids: z.array(id).describe('one webhook job per matching endpoint'),
  skipped: z.string().optional().describe('why no job was written, when none was: `webhooks_disabled` or `no_matching_endpoint`'),
  replayed: z.boolean().describe('true: the idempotency key was used before; this is the first answer again and nothing was written'),
  schema_version: z.int().optional().describe("the version of its topic's schema the data was validated against"),
  warnings: z
    .array(z.string())
    .optional()
    .describe('under validation warn: each field that does not match its schema (`/data/order_id: required`); a deprecated topic says so'),
});

const noWorker = z.string().optional().describe('no process running jobs has been seen in the last minute: the jobs wait until one runs');

export const notifyAnswer = eventAnswer.extend({ warning: noWorker });
export const notifyBatchAnswer = z.object({ results: z.array(eventAnswer).describe('in the order of `events`'), warning: noWorker });

// ---- jobs ---------------------------------------------------------------------------------

const CIRCUIT_STATES = ['closed', 'open', 'half_open'] as const satisfies readonly CircuitState[];

/** Why a pending job waits (docs/operations.md#held-jobs); null when it is not held. */
const held = z
  .object({
    reason: z
      .enum(['disabled', 'paused', 'circuit'])
      .describe('its endpoint is disabled (config or API), paused by hand, or its circuit is not closed; the most lasting first'),
    circuit: z.enum(CIRCUIT_STATES),
    since: instant.nullable().describe('the outage began (circuit), or the pause; null for a disabled endpoint'),
    next_probe_at: instant
      .nullable()
      .describe('when an open circuit next lets one probe through (past: as soon as a job is due); null while paused or disabled'),
  })
  .nullable()
  .describe('a pending job held by its endpoint: its status stays pending and its run_at may be past; null when not held');

export const jobAnswer = z.object({
  id,
  type: z.string(),
  status: z.enum(JOB_STATUSES as readonly JobStatus[] as [JobStatus, ...JobStatus[]]),
  attempts: count,
  max_attempts: count,
  run_at: instant,
  last_error: z.string().nullable(),
  created_at: instant,
  completed_at: instant.nullable(),
  topic: z.string().nullable(),
  endpoint: z.string().nullable(),
  event_id: id.nullable(),
  held,
});

export const attemptAnswer = z.object({
  number: z.int().min(1).describe("its place among all of the job's attempts, every series together"),
  series: z
    .int()
    .min(0)
    .describe('0: the original attempts; n: the n-th time an operator sent the job again (retry, redrive or endpoint replay)'),
  attempt: z.int().describe('its number within its series (each series counts up to max_attempts from 1)'),
  status_code: z.int().nullable().describe("the receiver's HTTP status; null when none came"),
  error_kind: z.string().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number(),
  response_body: z.string().nullable().describe("the first 4 KiB of the receiver's answer"),
  lease_lost: z.boolean(),
  aborted: z.boolean().describe('cut short by a shutdown: says nothing about the receiver'),
  created_at: instant,
});

export const jobDetailAnswer = jobAnswer.extend({
  payload: z.unknown().describe("the job's payload (a webhook job: its topic and body)"),
  deliveries: z.array(attemptAnswer).describe('every HTTP attempt, oldest first'),
});

const cursor = z.string().nullable().describe('pass it as `cursor` for the next page; null on the last');
export const jobPage = z.object({ items: z.array(jobAnswer), next_cursor: cursor });
export const redriveAnswer = z.object({
  count: count.describe('jobs re-queued (with `dry_run`: that match)'),
  dry_run: z.literal(true).optional(),
});

// ---- ordering keys --------------------------------------------------------------------------

export const blockedKey = z.object({
  endpoint: z.string(),
  ordering_key: z.string(),
  head_job_id: id.describe('the dead head; `GET /v1/jobs/:id` shows its attempts'),
  blocked_at: instant,
  last_error: z.string().nullable().describe("the head's last error"),
  waiting: count.describe('events of the key waiting behind it (counted up to 10,000)'),
  waiting_capped: z.boolean().describe('true: there are at least `waiting`'),
});
export const blockedKeyList = z.object({ items: z.array(blockedKey) });
export const headActionAnswer = z.object({
  endpoint: z.string(),
  ordering_key: z.string(),
  head_job_id: id,
  action: z.enum(['retried', 'skipped']),
});

// ---- endpoints ----------------------------------------------------------------------------

export const endpointAnswer = z.object({
  name: z.string(),
  source: z.enum(['config', 'api']).describe('config: from the config file (pause and resume only); api: created through the API'),
  description: z.string(),
  owner: z.string().nullable().describe('the user that created it; null for config endpoints'),
  created_at: instant.nullable(),
  updated_at: instant.nullable(),
  url: z.string().describe('user-info and secret-looking query values redacted'),
  topics: z.array(z.string()).readonly(),
  enabled: z.boolean(),
  scheme: z.enum(SCHEMES),
  ordering: z.enum(ORDERINGS).describe('keyed events after a dead head: relaxed lets the next go, strict blocks the key'),
  propagate_trace: z
    .boolean()
    .nullable()
    .describe(
      'with tracing on, each POST carries traceparent/tracestate; null: a stored endpoint that follows notify.webhook.propagate_trace (config endpoints show theirs resolved)',
    ),
  timeout_ms: z.int(),
  max_in_flight: z.int(),
  rotate_until: instant.nullable().describe('a secret rotation under way until then: both secrets sign'),
  window_minutes: z.int(),
  attempts: count.describe('attempts in the window (shutdown-aborted ones left out)'),
  success_rate: z.number().nullable().describe('share of those attempts answered 2xx; null with none'),
  p50_duration_ms: z.number().nullable(),
  p99_duration_ms: z.number().nullable(),
  last_error: z.string().nullable(),
  last_error_at: instant.nullable(),
  last_attempt_at: instant.nullable(),
  paused: z.boolean(),
  paused_at: instant.nullable(),
  paused_by: z.string().nullable(),
  circuit: z.object({
    state: z.enum(CIRCUIT_STATES),
    since: instant.nullable(),
    opened_at: instant.nullable(),
    next_probe_at: instant.nullable(),
    consecutive_failures: count,
    last_error: z.string().nullable(),
    last_error_at: instant.nullable(),
  }),
  rate_limit: z.number().nullable().describe('deliveries per second across all processes; null: none'),
  adaptive_limit: z.int().nullable().describe("this process's adaptive in-flight limit; null where it runs no workers"),
  in_flight: z.int().nullable(),
  held_jobs: count.describe(
    "due pending jobs held back: open, half-open, paused or disabled, with those behind their ordering key's head (counted up to 100,000)",
  ),
  health: z
    .enum(HEALTH_WORDS)
    .describe('the most pressing of: disabled, paused, down (circuit not closed), failing (most recent deliveries refused), healthy'),
  failing: z
    .object({ since: instant.nullable(), status_codes: z.array(z.int()).describe('the 4xx statuses of the run judged failing') })
    .nullable()
    .describe('at least half of its last `circuit.min_attempts` deliveries failed permanently; null: not failing'),
  warnings: z.array(z.string()).optional().describe('after a create or change: a topic pattern that matches no topic of the catalog'),
});

export const endpointList = z.object({ items: z.array(endpointAnswer) });
export const createdEndpointAnswer = endpointAnswer.extend({ secret: z.string().describe('answered this once; stored encrypted') });
export const changedEndpointAnswer = endpointAnswer.extend({ changed: z.boolean().describe('false: it was so already') });
export const rotatedSecretAnswer = z.object({
  name: z.string(),
  secret_next: z.string().describe('the new secret, answered this once'),
  rotate_until: instant,
  generated: z.boolean().describe('true: the service made the secret'),
});
export const deletedEndpointAnswer = z.object({ name: z.string(), deleted: z.literal(true), cancelled_jobs: count });
export const testDeliveryAnswer = z.object({ event_id: id, job_ids: z.array(id) });

export const replayAnswer = z.object({
  endpoint: z.string(),
  status: z.enum(REPLAY_STATUSES),
  window: z.object({ since: instant, until: instant }),
  reset: count.describe('jobs reset to pending (with `dry_run`: that would be)'),
  created: count.describe('jobs made for events of the window that had none for this endpoint'),
  unchanged: z.record(z.string(), count).describe('jobs of the window left as they are, by status'),
  retention_limited: z.boolean(),
  requested_since: instant.optional(),
  note: z.string().optional(),
  dry_run: z.literal(true).optional(),
  repeated: z.literal(true).optional().describe('the answer of an earlier request with the same idempotency key: nothing was written'),
});

// ---- notifications, alerts, processes, stats ----------------------------------------------

export const notificationAnswer = z.object({
  id: z.int(),
  topic: z.string(),
  data: z.unknown().describe('the event data as notified'),
  read_at: instant.nullable(),
  created_at: instant,
});
export const notificationPage = z.object({ items: z.array(notificationAnswer), next_cursor: cursor });

/** An alert: its audit row's id, action and time, over the details its action records (open). */
export const alertAnswer = z
  .looseObject({
    id: z.int(),
    action: z.enum(ALERT_ACTIONS),
    created_at: instant,
    state: z
      .enum(['open', 'resolved'])
      .describe('resolved by the alert that says its condition ended, or, for one with no such alert, when acknowledged'),
    resolved_at: instant.nullable(),
    resolved_by: z.int().nullable().describe('the alert that resolved it'),
    acknowledged_at: instant.nullable(),
    acknowledged_by: z.string().nullable(),
    flaps: count.describe('how many more times its condition began while it stood (a circuit that opened again)'),
  })
  .describe(
    'a dead letter: job_id, type, endpoint, topic, event_id, attempts, reason, last_error; an endpoint alert: endpoint and its state; a blocked ordering key: endpoint, ordering_key, job_id (its dead head), last_error',
  );
export const alertPage = z.object({ items: z.array(alertAnswer), next_cursor: cursor });
export const ackAlertsAnswer = z.object({
  acknowledged: count.describe('alerts acknowledged by this call (those acknowledged before are left as they are)'),
  up_to: z.int().describe('the newest alert id it covered'),
});

export const processAnswer = z.object({
  id: z.string(),
  mode: z.enum(['serve', 'worker']),
  host: z.string(),
  pid: z.int(),
  version: z.string(),
  jobs: z.boolean().describe('runs jobs: outbox pump, workers and runners'),
  started_at: instant,
  last_seen: instant,
  in_flight: count,
  runners: z.array(z.string()),
  gone: z.boolean().describe('not seen for three beats: killed, hung or cut off from the database'),
});
export const processList = z.object({ now: instant, items: z.array(processAnswer) });

export const statsAnswer = z.object({
  now: instant,
  queue: z.object({
    pending: count,
    running: count,
    dead: count,
    completed_24h: count,
    cancelled_24h: count,
    estimated: z
      .array(z.string())
      .optional()
      .describe('the counts above that are estimates from the table statistics rather than exact: pending or dead, past 1,000'),
  }),
  oldest_due: z.object({ run_at: instant, age_seconds: z.number() }).nullable(),
  deliveries: z.object({
    window: z.enum(['1h', '24h']),
    bucket_seconds: z.int(),
    total: count,
    failed: count,
    failure_rate: z.number(),
    per_minute: z.number(),
    buckets: z.array(z.object({ at: instant, ok: count, failed: count })),
  }),
});

/** Named in the OpenAPI document's components, so generated clients name their types after them. */
export const COMPONENTS = {
  Error: errorAnswer,
  Job: jobAnswer,
  JobDetail: jobDetailAnswer,
  Attempt: attemptAnswer,
  Endpoint: endpointAnswer,
  EventAnswer: eventAnswer,
  NotifyAnswer: notifyAnswer,
  Notification: notificationAnswer,
  Alert: alertAnswer,
  Process: processAnswer,
} as const;
