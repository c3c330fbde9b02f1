/**
 * The queue's vocabulary.
 *
 * - job: one row of `jobs`; `type` picks the handler (`webhook.deliver`).
 * - claim: a worker takes due pending jobs in one statement (`for update skip locked`), setting
 *   status `running`, a fresh `lease_token` and `lease_expires_at` from the database clock, and
 *   spending one attempt.
 * - lease: the right to finish a claimed job. Every later write is guarded by id + lease_token +
 *   status `running`, so a worker whose lease expired (and was reaped, maybe re-claimed) changes nothing.
 * - outcome: what a handler's run came to; the pool writes outcomes in batches.
 * - release: hand a job back to `pending` without spending the attempt (shutdown, unknown endpoint).
 * - dead: no more tries; the dead hook runs in the same transaction as that status change.
 *
 * States: pending -> running -> completed | pending (retry, release, reaper) | dead; pending -> cancelled.
 * Every move is one function of transitions.ts; the diagram is docs/operations.md#job-states.
 */

export type JobStatus = 'pending' | 'running' | 'completed' | 'dead' | 'cancelled';

export interface NewJob {
  /** Set by the caller when it must know the id before the insert; else the database picks one. */
  id?: string;
  type: string;
  payload: unknown;
  maxAttempts: number;
  /** Delay before the job is due; 0 or absent: now. */
  delayMs?: number;
  eventId?: string | null;
  endpoint?: string | null;
  /**
   * Ordered delivery (docs/operations.md#ordered-delivery): per endpoint and key one job in flight,
   * the rest behind it in order. Needs `endpoint` and `id`.
   */
  orderingKey?: string | null;
  /** A dead head blocks its key until an operator retries or skips it (else the next goes). */
  strictOrdering?: boolean;
  /**
   * Its event, not stored with it: for a job inserted already claimed by this process (a handover),
   * what a claim would read (ClaimedJob.event). Called only for such jobs.
   */
  event?: () => JobEvent;
}

/**
 * A job's event as its claim reads it from `events`, for a job whose payload leaves its body to
 * be made from the event (docs/architecture.md#bodies-by-reference): the data as JSON text with its object
 * keys in the order PostgreSQL's jsonb keeps them (what JSON.stringify makes of it as node-postgres
 * parses it), and its created_at as `occurred_at` text (UTC, milliseconds truncated, `Z`).
 */
export interface JobEvent {
  dataJson: string;
  occurredAt: string;
}

export interface ClaimedJob {
  id: string;
  type: string;
  payload: unknown;
  attempts: number;
  maxAttempts: number;
  leaseToken: string;
  /** Database-issued expiry, converted to this process's clock. */
  leaseExpiresAt: number;
  eventId: string | null;
  endpoint: string | null;
  /** Its ordering key and its number within it (per endpoint and key), when it has one. */
  orderingKey?: string | null;
  orderingSeq?: number | null;
  createdAt: Date;
  /** Its event, read with the claim when its payload carries no body (JobEvent); else null. */
  event?: JobEvent | null;
  /** Since when its endpoint has been unknown (column `parked_since`): the 24 h rule to dead. */
  endpointUnknownSince: Date | null;
  /**
   * Since when its turns have found the endpoint unknown or disabled (column `skipped_since`): its
   * waits grow with it.
   */
  skippedTurnsSince: Date | null;
}

/** A leased job's guarded identity: every write after the claim matches both. */
export interface LeaseRef {
  id: string;
  leaseToken: string;
}

/** One HTTP attempt, written to `webhook_attempts` in the same statement as the job's outcome. */
export interface AttemptRecord {
  attempt: number;
  endpoint: string | null;
  statusCode: number | null;
  errorKind: string | null;
  error: string | null;
  durationMs: number;
  responseBody: string | null;
  aborted?: boolean;
  /** A circuit breaker's probe (docs/operations.md#circuit-breaker): a failed one spends no attempt. */
  probe?: boolean;
}

export type JobOutcome =
  | { kind: 'complete'; attempt?: AttemptRecord }
  /** Try again after back-off (or retryAfterMs when later), dead once attempts are spent. */
  | { kind: 'retry'; error: string; retryAfterMs?: number; attempt?: AttemptRecord }
  | { kind: 'permanent'; error: string; attempt?: AttemptRecord }
  /** Back to pending without spending the attempt; dead with `error` once its endpoint has been unknown longer than deadAfterMs. */
  | {
      kind: 'release';
      delayMs: number;
      error: string;
      park?: { reason: 'unknown' | 'disabled'; deadAfterMs: number };
      attempt?: AttemptRecord;
    };

/** A job row as the dead hook sees it, after the transition. */
export interface DeadJob {
  id: string;
  type: string;
  payload: unknown;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  eventId: string | null;
  endpoint: string | null;
  /** Its ordering key, when the statement that moved it returns it. */
  orderingKey?: string | null;
  reason: DeadReason;
}

export type DeadReason = 'permanent' | 'max_attempts' | 'reaped' | 'parked';

/**
 * Runs inside the transaction that moved `jobs` to dead, with only the rows that transaction
 * actually changed, so whatever it writes exists exactly once per dead job.
 */
export type DeadHook = (client: import('pg').ClientBase, jobs: DeadJob[]) => Promise<void>;
