import { JOB_COLUMNS, type JobRow } from '../queue/job-rows.js';
import type { JobStatus } from '../queue/types.js';
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
}

export interface AttemptView {
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

export function toJobView(r: JobRow): JobView {
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
  };
}

export function requireStatus(value: unknown, field = 'status'): JobStatus {
  if (!JOB_STATUSES.includes(value as JobStatus)) throw badField(field, `expected one of ${JOB_STATUSES.join(', ')}`);
  return value as JobStatus;
}
