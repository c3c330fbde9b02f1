import type { AttemptRecord, LeaseRef } from './types.js';

/**
 * The attempt rows an outcome carries (one HTTP try each), written by the outcome's own statement
 * in transitions.ts: `cte` appends an insert into `webhook_attempts` to its `upd` CTE, so the row
 * exists exactly when the statement ran, flagged `lease_lost` when the job's lease was gone.
 */

export interface AttemptArrays {
  values: unknown[];
  /** SQL inserting the attempt rows, flagged lease_lost where `upd` has no row for the job. */
  cte: (first: number) => string;
}

export function attemptArrays(items: ReadonlyArray<{ leased: LeaseRef; attempt?: AttemptRecord | undefined }>): AttemptArrays | null {
  const rows: unknown[] = [];
  for (const i of items) {
    const a = i.attempt;
    if (!a) continue;
    rows.push({
      job_id: i.leased.id,
      lease_token: i.leased.leaseToken,
      attempt: a.attempt,
      endpoint: a.endpoint,
      status_code: a.statusCode,
      error_kind: a.errorKind,
      error: a.error,
      duration_ms: Math.round(a.durationMs),
      response_body: a.responseBody,
      aborted: a.aborted === true,
      probe: a.probe === true,
    });
  }
  if (rows.length === 0) return null;
  // One json parameter built by one JSON.stringify: far cheaper for the worker than ten arrays
  // serialised element by element, and json (not jsonb) is parsed once by the server.
  return {
    values: [JSON.stringify(rows)],
    cte: (n) => `, att as (
      insert into webhook_attempts (job_id, lease_token, attempt, endpoint, status_code, error_kind, error, duration_ms, response_body, aborted, probe, lease_lost)
      select a.job_id, a.lease_token, a.attempt, a.endpoint, a.status_code, a.error_kind, a.error, a.duration_ms, a.response_body, a.aborted, a.probe,
        upd.id is null
      from json_to_recordset($${n}::json)
        as a(job_id uuid, lease_token uuid, attempt int, endpoint text, status_code int, error_kind text, error text, duration_ms int,
             response_body text, aborted boolean, probe boolean)
      left join upd on upd.id = a.job_id
      on conflict (job_id, lease_token) do nothing)`,
  };
}
