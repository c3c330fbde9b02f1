import { redactUrl, type Endpoint, type Scheme } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { enqueueJobs } from '../queue/transitions.js';
import type { Service } from '../service.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../webhook/job.js';
import { writeAudit } from './audit.js';
import { ApiError, badField } from '../errors.js';
import { prepareTestDelivery, readEndpointStates, requireEndpoint, type CircuitState } from './endpoint-state.js';
import { iso } from './params.js';

/** Endpoints as operators see them: config (URL shown, secret never) and recent delivery health. */
export interface EndpointHealth {
  name: string;
  /** config: from the config file (pause and resume only through the API); api: created through the API. */
  source: 'config' | 'api';
  description: string;
  /** The principal that created it (api endpoints); null for config endpoints. */
  owner: string | null;
  created_at: string | null;
  updated_at: string | null;
  url: string;
  topics: readonly string[];
  enabled: boolean;
  scheme: Scheme;
  timeout_ms: number;
  max_in_flight: number;
  /** A secret rotation under way: both secrets sign until then (docs/operations.md#rotating-a-secret); null: none. */
  rotate_until: string | null;
  window_minutes: number;
  /** Attempts in the window (shutdown-aborted ones left out: they say nothing about the receiver). */
  attempts: number;
  /** Share of those attempts answered 2xx; null with no attempts. */
  success_rate: number | null;
  p50_duration_ms: number | null;
  p99_duration_ms: number | null;
  last_error: string | null;
  last_error_at: string | null;
  last_attempt_at: string | null;
  /** Paused by hand (`POST /v1/endpoints/:name/pause`, `endpoints pause`): its jobs wait, pending. */
  paused: boolean;
  paused_at: string | null;
  paused_by: string | null;
  /** The circuit breaker's state, shared by every process (no row yet: closed, no failures). */
  circuit: {
    state: CircuitState;
    since: string | null;
    opened_at: string | null;
    next_probe_at: string | null;
    consecutive_failures: number;
    last_error: string | null;
    last_error_at: string | null;
  };
  /** Configured deliveries per second across all processes; null: none. */
  rate_limit: number | null;
  /** This process's adaptive in-flight limit and deliveries running now; null where it runs no workers (the CLI). */
  adaptive_limit: number | null;
  in_flight: number | null;
  /** Due pending jobs held back because the endpoint is open, half-open, paused or disabled (up to 100,000). */
  held_jobs: number;
}

/** What only the process answering knows: its adaptive limits and in-flight deliveries. */
export interface LocalDeliveries {
  caps?: () => ReadonlyMap<string, number>;
  inFlightFor?: (endpoint: string) => number;
}

interface StatRow {
  endpoint: string;
  attempts: number;
  success_rate: number;
  p50: number | null;
  p99: number | null;
  last_attempt_at: Date | null;
}

/** Attempts are timed in whole ms; an interpolated percentile is shown to 0.1 ms, not as 56.519999999999996. */
function roundMs(ms: number | null | undefined): number | null {
  return ms === null || ms === undefined ? null : Math.round(ms * 10) / 10;
}

export async function endpointHealth(
  db: Queryable,
  endpoints: readonly Endpoint[],
  windowMinutes = 60,
  local: LocalDeliveries = {},
): Promise<EndpointHealth[]> {
  if (!Number.isInteger(windowMinutes) || windowMinutes < 1 || windowMinutes > 7 * 24 * 60) {
    throw badField('window', 'expected whole minutes from 1 to 10080');
  }
  const names = endpoints.map((e) => e.name);
  const stats = await db.query<StatRow>(
    `select endpoint, count(*)::int as attempts,
       avg(case when status_code between 200 and 299 then 1 else 0 end)::float8 as success_rate,
       percentile_cont(0.5) within group (order by duration_ms) as p50,
       percentile_cont(0.99) within group (order by duration_ms) as p99,
       max(created_at) as last_attempt_at
     from webhook_attempts
     where endpoint = any($1::text[]) and created_at > now() - $2 * interval '1 minute' and not aborted
     group by endpoint`,
    [names, windowMinutes],
  );
  const errors = await db.query<{ endpoint: string; error: string | null; created_at: Date }>(
    `select distinct on (endpoint) endpoint, coalesce(error, error_kind) as error, created_at
     from webhook_attempts
     where endpoint = any($1::text[]) and created_at > now() - $2 * interval '1 minute' and error_kind is not null and not aborted
     order by endpoint, created_at desc`,
    [names, windowMinutes],
  );
  const states = await readEndpointStates(db, endpoints);
  const byName = new Map(stats.rows.map((r) => [r.endpoint, r]));
  const errByName = new Map(errors.rows.map((r) => [r.endpoint, r]));
  const caps = local.caps?.();
  return endpoints.map((e) => {
    const s = byName.get(e.name);
    const err = errByName.get(e.name);
    const st = states.get(e.name);
    return {
      name: e.name,
      source: e.source ?? 'config',
      description: e.description ?? '',
      owner: e.owner ?? null,
      created_at: e.created_at ?? null,
      updated_at: e.updated_at ?? null,
      url: redactUrl(e.url),
      topics: e.topics,
      enabled: e.enabled,
      scheme: e.scheme,
      timeout_ms: e.timeout,
      max_in_flight: e.max_in_flight,
      rotate_until: e.rotate_until !== undefined && e.rotate_until > Date.now() ? new Date(e.rotate_until).toISOString() : null,
      window_minutes: windowMinutes,
      attempts: s?.attempts ?? 0,
      success_rate: s ? s.success_rate : null,
      p50_duration_ms: roundMs(s?.p50),
      p99_duration_ms: roundMs(s?.p99),
      last_error: err?.error ?? null,
      last_error_at: iso(err?.created_at ?? null),
      last_attempt_at: iso(s?.last_attempt_at ?? null),
      paused: st?.paused ?? false,
      paused_at: iso(st?.paused_at ?? null),
      paused_by: st?.paused_by ?? null,
      circuit: {
        state: st?.circuit ?? 'closed',
        since: iso(st?.circuit_since ?? null),
        opened_at: iso(st?.opened_at ?? null),
        next_probe_at: iso(st?.next_probe_at ?? null),
        consecutive_failures: st?.consecutive_failures ?? 0,
        last_error: st?.last_error ?? null,
        last_error_at: iso(st?.last_error_at ?? null),
      },
      rate_limit: e.rate_limit > 0 ? e.rate_limit : null,
      adaptive_limit: caps?.get(e.name) ?? null,
      in_flight: local.inFlightFor ? local.inFlightFor(e.name) : null,
      held_jobs: st?.held_jobs ?? 0,
    };
  });
}

/** One endpoint's view (the answer to pause, resume); a 404 naming `name` if it is not configured. */
export async function endpointView(
  db: Queryable,
  endpoints: readonly Endpoint[],
  name: string,
  local: LocalDeliveries = {},
): Promise<EndpointHealth> {
  const [view] = await endpointHealth(db, [requireEndpoint(endpoints, name)], 60, local);
  return view!;
}

export const TEST_TOPIC = 'webhook.test';

/**
 * Send a `webhook.test` event to one endpoint only, whatever its whitelist: the event row is written
 * already dispatched (so the dispatcher never fans it out) and its one job is enqueued directly.
 */
export async function testEndpoint(svc: Service, name: string, actor: string): Promise<{ event_id: string; job_ids: string[] }> {
  const ep = requireEndpoint(svc.endpoints, name);
  if (!ep.enabled) {
    throw new ApiError(409, 'endpoint_disabled', `endpoint ${name} is disabled: a test would wait until it is enabled`, { field: 'name' });
  }
  const data = { message: 'test event from acw-webhooks', endpoint: name, requested_by: actor };
  const result = await withTransaction(svc.db.pool, async (client) => {
    // Paused: 409 before anything is written. Open: the test job waits for the probe, so probe now.
    const { probeNow } = await prepareTestDelivery(client, svc.channels.endpoints, name);
    const ev = await client.query<{ id: string; created_at: Date }>(
      `insert into events (topic, data, principal, dispatched_at) values ($1, $2::jsonb, $3, now()) returning id, created_at`,
      [TEST_TOPIC, JSON.stringify(data), actor],
    );
    const { id: eventId, created_at: occurredAt } = ev.rows[0]!;
    const payload: DeliverPayload = { topic: TEST_TOPIC, body: buildBody({ id: eventId, topic: TEST_TOPIC, occurredAt, data }) };
    const jobIds = await enqueueJobs(
      client,
      [{ type: WEBHOOK_JOB, payload, maxAttempts: svc.config.jobs.max_attempts, eventId, endpoint: name }],
      svc.channels.jobs,
    );
    const res = { event_id: eventId, job_ids: jobIds };
    await client.query(`update events set response = $2::jsonb where id = $1`, [eventId, JSON.stringify(res)]);
    const details = probeNow ? { ...res, probe_now: true } : res;
    await writeAudit(client, { action: 'endpoint.test', actor, targetType: 'endpoint', targetId: name, details });
    return res;
  });
  svc.metrics.jobsEnqueued(WEBHOOK_JOB, TEST_TOPIC, result.job_ids.length);
  return result;
}
