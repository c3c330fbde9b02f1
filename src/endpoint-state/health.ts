import { iso, requireEndpoint } from '../admin/params.js';
import { redactUrl, type Endpoint, type Scheme } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { badField } from '../errors.js';
import type { CircuitState, HealthWord } from './types.js';
import { deliveryHealth } from '../history/stats.js';

/**
 * What operators read of endpoints (`GET /v1/endpoints`, `endpoints list`, the endpoint metrics):
 * each endpoint's shared state (`endpoint_state`, held jobs counted) and its recent delivery health
 * (per-minute counters, `delivery_stats`), beside its config.
 */

/** One endpoint's shared state as operators see it; an endpoint with no row is closed with no failures. */
export interface EndpointStateView {
  paused: boolean;
  paused_at: Date | null;
  paused_by: string | null;
  circuit: CircuitState;
  circuit_since: Date | null;
  opened_at: Date | null;
  next_probe_at: Date | null;
  consecutive_failures: number;
  last_error: string | null;
  last_error_at: Date | null;
  /** Due pending jobs held back (open, half-open, paused or disabled), counted up to the cap; 0 otherwise. */
  held_jobs: number;
  failing: boolean;
  failing_since: Date | null;
  failing_codes: number[];
}

/** Held jobs are counted up to this many per endpoint: a bounded read of the due index, like acw_queue_depth. */
export const HELD_JOBS_CAP = 100_000;

interface StateRow {
  endpoint: string;
  circuit: CircuitState | null;
  circuit_since: Date | null;
  opened_at: Date | null;
  next_probe_at: Date | null;
  consecutive_failures: number | null;
  last_error: string | null;
  last_error_at: Date | null;
  paused: boolean | null;
  paused_at: Date | null;
  paused_by: string | null;
  held_jobs: number;
  failing: boolean | null;
  failing_since: Date | null;
  failing_codes: number[] | null;
}

/**
 * The state of each endpoint in one statement. Held jobs are counted only for an endpoint that holds
 * them, through job_queue_due_endpoint_idx (endpoint, run_at, id) where status = 'pending', with the
 * jobs behind their ordering key's head (they wait too) through job_queue_behind_idx, and at most
 * `cap` each, so a large backlog costs a bounded index read.
 */
export async function readEndpointStates(
  db: Queryable,
  endpoints: readonly Pick<Endpoint, 'name' | 'enabled'>[],
  cap = HELD_JOBS_CAP,
): Promise<Map<string, EndpointStateView>> {
  const res = await db.query<StateRow>({
    name: 'acw_endpoint_states',
    text: `select e.name as endpoint, s.circuit, s.circuit_since, s.opened_at, s.next_probe_at, s.consecutive_failures,
         s.last_error, s.last_error_at, s.paused, s.paused_at, s.paused_by, s.failing, s.failing_since, s.failing_codes,
         case when coalesce(s.circuit, 'closed') <> 'closed' or coalesce(s.paused, false) or not e.enabled
           then least($3::int, (select count(*)::int from (select 1 from job_queue j
                  where j.status = 'pending' and j.endpoint = e.name and j.run_at <= now() limit $3) h)
             + (select count(*)::int from (select 1 from job_queue j where j.status = 'behind' and j.endpoint = e.name limit $3) b))
           else 0 end as held_jobs
       from unnest($1::text[], $2::bool[]) as e(name, enabled)
       left join endpoint_state s on s.endpoint = e.name`,
    values: [endpoints.map((e) => e.name), endpoints.map((e) => e.enabled), cap],
  });
  return new Map(
    res.rows.map((r) => [
      r.endpoint,
      {
        paused: r.paused ?? false,
        paused_at: r.paused_at,
        paused_by: r.paused_by,
        circuit: r.circuit ?? 'closed',
        circuit_since: r.circuit_since,
        opened_at: r.opened_at,
        next_probe_at: r.next_probe_at,
        consecutive_failures: r.consecutive_failures ?? 0,
        last_error: r.last_error,
        last_error_at: r.last_error_at,
        held_jobs: r.held_jobs,
        failing: r.failing ?? false,
        failing_since: r.failing_since,
        failing_codes: r.failing_codes ?? [],
      },
    ]),
  );
}

/**
 * One word for an endpoint's state, the most pressing first: `disabled` (in config), `paused`,
 * `down` (its circuit is not closed), `failing` (at least half of its recent deliveries failed
 * permanently: docs/operations.md#failing-endpoints), else `healthy`.
 */

function healthWord(enabled: boolean, st: EndpointStateView | undefined): HealthWord {
  if (!enabled) return 'disabled';
  if (st?.paused) return 'paused';
  if (st && st.circuit !== 'closed') return 'down';
  return st?.failing ? 'failing' : 'healthy';
}

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
  ordering: 'relaxed' | 'strict';
  /** Whether POSTs carry traceparent/tracestate: a stored endpoint's own setting (null: the default), a config endpoint's as resolved. */
  propagate_trace: boolean | null;
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
  health: HealthWord;
  /** Failing since when, with the statuses of the run that made it so; null while not failing. */
  failing: { since: string | null; status_codes: number[] } | null;
}

/** What only the process answering knows: its adaptive limits and in-flight deliveries. */
export interface LocalDeliveries {
  caps?: () => ReadonlyMap<string, number>;
  inFlightFor?: (endpoint: string) => number;
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
  // Per-minute counters (src/history/stats.ts), not attempt rows: the same cost at any volume.
  const health = await deliveryHealth(
    db,
    endpoints.map((e) => e.name),
    windowMinutes,
  );
  const states = await readEndpointStates(db, endpoints);
  const caps = local.caps?.();
  return endpoints.map((e) => {
    const s = health.get(e.name);
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
      ordering: e.ordering ?? 'relaxed',
      propagate_trace: e.source === 'api' ? (e.propagate_trace_set ?? null) : (e.propagate_trace ?? false),
      timeout_ms: e.timeout,
      max_in_flight: e.max_in_flight,
      rotate_until: e.rotate_until !== undefined && e.rotate_until > Date.now() ? new Date(e.rotate_until).toISOString() : null,
      window_minutes: windowMinutes,
      attempts: s?.attempts ?? 0,
      success_rate: s ? s.success_rate : null,
      p50_duration_ms: roundMs(s?.p50),
      p99_duration_ms: roundMs(s?.p99),
      last_error: s?.last_error ?? null,
      last_error_at: iso(s?.last_error_at ?? null),
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
      health: healthWord(e.enabled, st),
      failing: st?.failing ? { since: iso(st.failing_since), status_codes: st.failing_codes } : null,
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
