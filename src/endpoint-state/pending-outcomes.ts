import type { JobOutcome } from '../queue/types.js';
import type { Delta } from './circuit-rows.js';
import type { CircuitConfig } from './types.js';

/**
 * The outcomes of this process's attempts, folded per endpoint until a flush writes them
 * (docs/operations.md#circuit-breaker). Whether a circuit opens or closes is decided by the flush
 * statement on the row (circuit-rows.ts); here only the counts are kept, and the failures in a
 * row this process alone has seen, which hold the endpoint here at the threshold until the row says
 * what it is.
 */
export class PendingOutcomes {
  private readonly deltas = new Map<string, Delta>();
  /** Failures in a row seen here since the last flush answered. */
  private readonly localFailures = new Map<string, number>();

  constructor(private readonly circuit: CircuitConfig) {}

  /** Endpoints with outcomes not yet written. */
  get size(): number {
    return this.deltas.size;
  }

  /** Has this process alone seen the failure threshold for this endpoint since the last flush answered? */
  tripped(endpoint: string): boolean {
    return (this.localFailures.get(endpoint) ?? 0) >= this.circuit.failure_threshold;
  }

  /**
   * Fold one attempt's signal into its endpoint's delta. A probe's job id and result go with it (a
   * probe that said nothing still leaves its endpoint's delta in place, so it is flushed).
   */
  add(endpoint: string, signal: 'failure' | 'success' | null, outcome: JobOutcome, probeJob: string | null): void {
    const d = this.deltas.get(endpoint) ?? {
      ok: 0,
      bad: 0,
      trailing: 0,
      err: null,
      probeJob: null,
      probeOk: null,
      permanent: 0,
      codes: [],
    };
    const code = permanentStatus(outcome);
    if (code !== null) {
      d.permanent++;
      if (!d.codes.includes(code)) d.codes.push(code);
    }
    if (signal === 'success') {
      d.ok++;
      d.trailing = 0;
      this.localFailures.set(endpoint, 0);
    } else if (signal === 'failure') {
      d.bad++;
      d.trailing++;
      d.err = outcome.attempt?.error ?? outcome.attempt?.errorKind ?? null;
      this.localFailures.set(endpoint, (this.localFailures.get(endpoint) ?? 0) + 1);
    }
    if (probeJob !== null && signal !== null) {
      d.probeJob = probeJob;
      d.probeOk = signal === 'success';
    }
    this.deltas.set(endpoint, d);
  }

  /** Every delta folded so far, in endpoint name order (the order the flush locks rows in); none are left. */
  take(): Array<[string, Delta]> {
    const batch = [...this.deltas].toSorted(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    this.deltas.clear();
    return batch;
  }

  /** A batch whose write failed, folded back in before what came since. */
  restore(batch: ReadonlyArray<readonly [string, Delta]>): void {
    for (const [ep, d] of batch) this.merge(ep, d);
  }

  /**
   * A batch is written: what this process alone had counted is in the row now (failures seen while
   * the statement ran stay counted here until the next flush writes them).
   */
  written(batch: ReadonlyArray<readonly [string, Delta]>): void {
    for (const [ep, d] of batch) {
      const left = (this.localFailures.get(ep) ?? 0) - d.bad;
      if (left > 0) this.localFailures.set(ep, left);
      else this.localFailures.delete(ep);
    }
  }

  private merge(ep: string, d: Delta): void {
    const cur = this.deltas.get(ep);
    if (!cur) {
      this.deltas.set(ep, d);
      return;
    }
    // Older outcomes go first: the newer delta's trailing failures stand if it had a success.
    cur.trailing = cur.ok > 0 ? cur.trailing : d.trailing + cur.trailing;
    cur.ok += d.ok;
    cur.bad += d.bad;
    cur.err ??= d.err;
    cur.probeJob ??= d.probeJob;
    cur.probeOk ??= d.probeOk;
    cur.permanent += d.permanent;
    for (const c of d.codes) if (!cur.codes.includes(c)) cur.codes.push(c);
  }
}

/** Answers that say the receiver refuses this request for good, not that it is busy or down (docs/operations.md#failing-endpoints). */
const NOT_PERMANENT = new Set([408, 425, 429]);

/** The status of an attempt answered with a permanent failure (4xx other than 408, 425 and 429); null for any other. */
export function permanentStatus(outcome: JobOutcome): number | null {
  const a = outcome.attempt;
  if (!a || a.aborted || a.statusCode === null) return null;
  return a.statusCode >= 400 && a.statusCode < 500 && !NOT_PERMANENT.has(a.statusCode) ? a.statusCode : null;
}
