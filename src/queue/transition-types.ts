import type { ClaimPlan } from './slots.js';
import type { AttemptRecord, ClaimedJob, DeadReason, LeaseRef } from './types.js';

/** What the transitions of transitions.ts take and answer (kept apart so that module stays the statements). */

export interface ClaimOptions {
  workerId: string;
  leaseMs: number;
  types?: readonly string[];
  /** Without a plan: any due job, oldest first, at most this many. */
  limit?: number;
  /**
   * What a worker pool may take (SlotBudget.beginClaim). With per-endpoint slots, only those
   * endpoints are read (an endpoint at 0 is skipped without reading its backlog), round-robin.
   */
  plan?: ClaimPlan;
}

/** Jobs inserted already leased to this process (claim on dispatch): its worker id and lease length. */
export interface LeaseOptions {
  workerId: string;
  leaseMs: number;
  /** Ids (set on the NewJob) of the jobs to insert as `running`; the rest go in as `pending`. */
  ids: ReadonlySet<string>;
}

export interface InsertedJobs {
  ids: string[];
  /** The jobs inserted as `running` under `lease`, as if claimed: attempt 1 spent, lease issued. */
  leased: ClaimedJob[];
}

export interface FailItem {
  leased: LeaseRef;
  error: string;
  /** Dead now, whatever attempts remain. */
  dead: boolean;
  reason: DeadReason;
  delayMs: number;
  attempt?: AttemptRecord | undefined;
}

export interface FailResult {
  /** Jobs whose lease still stood: each with its new status. */
  changed: Map<string, { status: 'pending' | 'dead'; runAt: Date }>;
}

export interface ReleaseItem {
  leased: LeaseRef;
  delayMs: number;
  error?: string | null;
  /**
   * Why the endpoint could not be used: `unknown` starts the 24 h clock (`parked_since`) unless it
   * runs, `disabled` stops it; both start `skipped_since` unless it runs. Without it (a hand-back
   * at shutdown, a lost lease) both stay as they are.
   */
  park?: 'unknown' | 'disabled';
  attempt?: AttemptRecord | undefined;
}

/** A webhook job expiry sent to dead. */
export interface ExpiredRow {
  id: string;
  type: string;
  payload: unknown;
  attempts: number;
  endpoint: string;
  event_id: string | null;
  series_started_at: Date;
  ordering_key: string | null;
}

/** Where the next page of a sweep starts: after this row of the due index (run_at as PostgreSQL prints it, microseconds intact). */
export interface ExpiryCursor {
  runAt: string;
  id: string;
}
