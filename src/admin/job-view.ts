import { JOB_COLUMNS, type JobRow } from '../queue/job-rows.js';
import type { JobStatus } from '../queue/types.js';
import type { CircuitState } from '../endpoint-state/types.js';
import { badField } from '../errors.js';
import { iso } from './params.js';

// The row and its columns live with the statements that return them (queue/job-rows.ts).
export { JOB_COLUMNS, type JobRow };

/** How operators see a job and its attempts: ISO dates, the topic lifted out of the payload. */
export const JOB_STATUSES: readonly JobStatus[] = ['pending', 'running', 'completed', 'dead', 'cancelled'];

export interface JobView {
  id: string;
  type: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  run_at: string;
  last_error: string | null;
  created_at: string;
  completed_at: string | null;
  topic: string | null;
  endpoint: string | null;
  event_id: string | null;
  /** Why this pending job waits, if its endpoint holds it (docs/operations.md#held-jobs); null when not held. */
  held: HeldView | null;
}

export interface AttemptView {
  /** Its place among every attempt of the job, all series together (1, 2, 3, …). */
  number: number;
  /** 0: the job's original attempts; n: the n-th time an operator sent it again (retry, redrive or endpoint replay). */
  series: number;
  /** Its number within its series, as the worker counts it against max_attempts. */
  attempt: number;
  status_code: number | null;
  error_kind: string | null;
  error: string | null;
  duration_ms: number;
  response_body: string | null;
  lease_lost: boolean;
  aborted: boolean;
  created_at: string;
}

export interface JobFilter {
  status?: string | undefined;
  type?: string | undefined;
  topic?: string | undefined;
  endpoint?: string | undefined;
  event_id?: string | undefined;
  /** Created at or after / before these instants. */
  created_after?: Date | undefined;
  created_before?: Date | undefined;
  /** Default 50, at most 500. */
  limit?: number | undefined;
  cursor?: string | undefined;
}

/**
 * Why a pending job waits though it may be due (docs/operations.md#held-jobs): its endpoint is
 * disabled (`disabled`), paused (`paused`), or its circuit is open or half-open (`circuit`), the
 * most lasting first. Its status stays pending.
 */
export interface HeldView {
  reason: 'disabled' | 'paused' | 'circuit';
  /** The endpoint's circuit state: `open`, `half_open`, or `closed` for a paused endpoint. */
  circuit: CircuitState;
  /** Since when: the outage's start for a circuit, the pause for a paused endpoint. */
  since: string | null;
  /** When an open circuit next lets one probe through (in the past: as soon as a job is due); null while paused. */
  next_probe_at: string | null;
}

/** The endpoint state joined to a pending job's row (HELD_JOIN); all null for a job not held. */
export interface HeldColumns {
  held_circuit: CircuitState | null;
  held_paused: boolean | null;
  held_opened_at: Date | null;
  held_paused_at: Date | null;
  held_next_probe_at: Date | null;
}

/**
 * Joined to at most a page of job rows `j`: one lookup of endpoint_state by its key per row, in
 * the same statement (no per-row read from JS). Only a pending job of an endpoint that holds.
 */
export const HELD_JOIN = `left join endpoint_state hs on j.status = 'pending' and hs.endpoint = j.endpoint and (hs.circuit <> 'closed' or hs.paused)`;
export const HELD_COLUMNS = `hs.circuit as held_circuit, hs.paused as held_paused, coalesce(hs.opened_at, hs.circuit_since) as held_opened_at,
  hs.paused_at as held_paused_at, hs.next_probe_at as held_next_probe_at`;

/**
 * The endpoints disabled now, in the config file or through the API: only the registry knows the
 * config's, so the caller names them, and a pending job of one of them reads `held: disabled`.
 */
export type DisabledEndpoints = ReadonlySet<string>;

export function toHeldView(r: Partial<HeldColumns> & Pick<JobRow, 'status' | 'endpoint'>, disabled?: DisabledEndpoints): HeldView | null {
  if (r.status === 'pending' && r.endpoint !== null && disabled?.has(r.endpoint)) {
    return { reason: 'disabled', circuit: r.held_circuit ?? 'closed', since: null, next_probe_at: null };
  }
  if (r.held_circuit === null || r.held_circuit === undefined) return null;
  if (r.held_paused) return { reason: 'paused', circuit: r.held_circuit, since: iso(r.held_paused_at ?? null), next_probe_at: null };
  return {
    reason: 'circuit',
    circuit: r.held_circuit,
    since: iso(r.held_opened_at ?? null),
    next_probe_at: iso(r.held_next_probe_at ?? null),
  };
}

/** A row of JOB_COLUMNS, with HELD_COLUMNS when the statement joined them (without: not held). */
export function toJobView(r: JobRow & Partial<HeldColumns>, disabled?: DisabledEndpoints): JobView {
  return {
    id: r.id,
    type: r.type,
    status: r.status,
    attempts: r.attempts,
    max_attempts: r.max_attempts,
    run_at: r.run_at.toISOString(),
    last_error: r.last_error,
    created_at: r.created_at.toISOString(),
    completed_at: iso(r.completed_at),
    topic: r.topic,
    endpoint: r.endpoint,
    event_id: r.event_id,
    held: toHeldView(r, disabled),
  };
}

export function requireStatus(value: unknown, field = 'status'): JobStatus {
  if (!JOB_STATUSES.includes(value as JobStatus)) throw badField(field, `expected one of ${JOB_STATUSES.join(', ')}`);
  return value as JobStatus;
}

/** An attempt row as read, before it is placed in its series. */
export type AttemptRow = Omit<AttemptView, 'number' | 'series' | 'created_at'> & { created_at: Date; probe: boolean };

/**
 * Number the attempts of one job (oldest first) across its series. An operator's retry, redrive or
 * replay starts a new series at attempt 1, ids kept, so the series is read from the numbers: a
 * number that goes down starts one, and so does a 1 after a 1 that spent its attempt. A failed
 * probe or an attempt cut short by a shutdown gives its attempt back, and the next one repeats its
 * number in the same series.
 */
export function placeAttempts(rows: readonly AttemptRow[]): AttemptView[] {
  let series = 0;
  return rows.map((r, i) => {
    const prev = rows[i - 1];
    if (prev && (r.attempt < prev.attempt || (r.attempt === 1 && prev.attempt === 1 && spent(prev)))) series++;
    const { probe: _probe, ...rest } = r;
    return { ...rest, number: i + 1, series, created_at: r.created_at.toISOString() };
  });
}

function spent(a: AttemptRow): boolean {
  const failedProbe = a.probe && !(a.status_code !== null && a.status_code >= 200 && a.status_code < 300);
  return !a.aborted && !failedProbe;
}
