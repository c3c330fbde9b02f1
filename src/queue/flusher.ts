import type pg from 'pg';
import { DoublingDelay } from '../delay.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { ensureDaysAhead, isMissingPartition } from '../history/partitions.js';
import { completeJobs, failJobs, finishKeyedJobs, releaseJobs, type FailItem, type ReleaseItem } from './transitions.js';
import type { AttemptRecord, ClaimedJob, DeadHook, JobOutcome } from './types.js';

/** A handler's run, waiting to be written. */
export interface Finished {
  job: ClaimedJob;
  outcome: JobOutcome;
  delayMs: number;
  leaseLost: boolean;
}

const BATCH = 500;

/**
 * Writes outcomes in batches: whatever finished while the previous write was under way goes in
 * the next one (one statement per kind). A write that fails is retried by itself, so an outcome is
 * neither lost nor written twice; outcomes whose lease was lost change nothing but their attempt row.
 */
export class Flusher {
  private queue: Finished[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly opts: {
      pool: pg.Pool;
      log: Logger;
      onDead?: DeadHook | undefined;
      onWritten?: (f: Finished, changed: boolean, runAt?: Date) => void;
      /**
       * Keyed jobs (docs/operations.md#ordered-delivery): the next job of a key whose head this
       * pool finished comes back claimed for `workerId`, and goes to `onHanded`.
       */
      ordering?: { workerId: string; leaseMs: number; channel: string; onHanded: (jobs: ClaimedJob[]) => void };
    },
  ) {}

  get pending(): number {
    return this.queue.length;
  }

  get idle(): boolean {
    return this.queue.length === 0 && this.flushing === null;
  }

  push(f: Finished): void {
    this.queue.push(f);
    if (!this.flushing) this.flushing = this.run().finally(() => (this.flushing = null));
  }

  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async run(): Promise<void> {
    const onError = new DoublingDelay(50, 5_000);
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, BATCH);
      const failed = await this.write(batch);
      if (failed.length > 0) {
        this.queue.unshift(...failed);
        await new Promise((r) => setTimeout(r, onError.next()));
      } else {
        onError.reset();
      }
    }
  }

  /** Write one batch; returns what could not be written, to try again. */
  private async write(batch: Finished[]): Promise<Finished[]> {
    const completes: Finished[] = [];
    const fails: Array<[Finished, FailItem]> = [];
    // Outcomes that may finish a key's head go through their keys' locks (finishKeyedJobs); a
    // release leaves the head where it is.
    const keyedCompletes: Finished[] = [];
    const keyedFails: Array<[Finished, FailItem]> = [];
    const releases: Array<[Finished, ReleaseItem]> = [];
    for (const f of batch) {
      const leased = { id: f.job.id, leaseToken: f.job.leaseToken };
      const o = f.outcome;
      const attempt: AttemptRecord | undefined = o.attempt;
      const keyed = f.job.orderingKey != null && f.job.endpoint !== null;
      if (o.kind === 'complete') (keyed ? keyedCompletes : completes).push(f);
      else if (o.kind === 'release') {
        const unknownFor = f.job.endpointUnknownSince ? Date.now() - f.job.endpointUnknownSince.getTime() : 0;
        if (o.park && f.job.endpointUnknownSince && unknownFor >= o.park.deadAfterMs) {
          (keyed ? keyedFails : fails).push([f, { leased, error: o.error, dead: true, reason: 'parked', delayMs: 0, attempt }]);
        } else {
          releases.push([f, { leased, delayMs: f.delayMs, error: o.error, ...(o.park ? { park: o.park.reason } : {}), attempt }]);
        }
      } else {
        const permanent = o.kind === 'permanent';
        (keyed ? keyedFails : fails).push([
          f,
          { leased, error: o.error, dead: permanent, reason: permanent ? 'permanent' : 'max_attempts', delayMs: f.delayMs, attempt },
        ]);
      }
    }
    const { pool, onDead } = this.opts;
    const keyOf = (f: Finished): { endpoint: string; key: string } => ({ endpoint: f.job.endpoint!, key: f.job.orderingKey! });
    const ord = this.opts.ordering;
    const [c, x, r, k] = await Promise.allSettled([
      completeJobs(
        pool,
        completes.map((f) => ({ leased: { id: f.job.id, leaseToken: f.job.leaseToken }, attempt: f.outcome.attempt })),
      ),
      failJobs(
        pool,
        fails.map(([, i]) => i),
        onDead,
      ),
      releaseJobs(
        pool,
        releases.map(([, i]) => i),
      ),
      keyedCompletes.length + keyedFails.length === 0
        ? null
        : finishKeyedJobs(
            pool,
            keyedCompletes.map((f) => ({
              leased: { id: f.job.id, leaseToken: f.job.leaseToken },
              attempt: f.outcome.attempt,
              key: keyOf(f),
            })),
            keyedFails.map(([f, i]) => ({ ...i, key: keyOf(f) })),
            {
              channel: ord?.channel ?? null,
              ...(ord ? { lease: { workerId: ord.workerId, leaseMs: ord.leaseMs } } : {}),
              onDead,
            },
          ),
    ]);
    const retry: Finished[] = [];
    if (c.status === 'fulfilled') for (const f of completes) this.report(f, c.value.has(f.job.id), 'completed');
    else this.writeFailed(c.reason, completes, retry);
    if (x.status === 'fulfilled') {
      for (const [f] of fails) {
        const ch = x.value.changed.get(f.job.id);
        this.report(f, ch !== undefined, ch?.status === 'dead' ? 'dead' : 'retry', ch?.runAt);
      }
    } else
      this.writeFailed(
        x.reason,
        fails.map(([f]) => f),
        retry,
      );
    if (r.status === 'fulfilled') for (const [f] of releases) this.report(f, r.value.has(f.job.id), 'released');
    else
      this.writeFailed(
        r.reason,
        releases.map(([f]) => f),
        retry,
      );
    if (k.status === 'fulfilled') {
      if (k.value) {
        for (const f of keyedCompletes) this.report(f, k.value.completed.has(f.job.id), 'completed');
        for (const [f] of keyedFails) {
          const ch = k.value.failed.changed.get(f.job.id);
          this.report(f, ch !== undefined, ch?.status === 'dead' ? 'dead' : 'retry', ch?.runAt);
        }
        if (k.value.handed.length > 0) ord?.onHanded(k.value.handed);
      }
    } else this.writeFailed(k.reason, [...keyedCompletes, ...keyedFails.map(([f]) => f)], retry);
    return retry;
  }

  private writeFailed(reason: unknown, items: Finished[], retry: Finished[]): void {
    this.opts.log.warn(
      { event: 'job.write_error', err: coerceError(reason).message, jobs: items.length },
      'writing job outcomes failed; retrying',
    );
    // A finished job moves into today's partition of job_history: should it be missing (every
    // process was down for longer than the days made ahead), make the days before the retry.
    if (isMissingPartition(reason)) void ensureDaysAhead(this.opts.pool).catch(() => undefined);
    retry.push(...items);
  }

  private report(f: Finished, changed: boolean, what: 'completed' | 'dead' | 'retry' | 'released', runAt?: Date): void {
    const { log } = this.opts;
    const base = { job_id: f.job.id, type: f.job.type, attempt: f.job.attempts };
    if (!changed) {
      log.warn(
        { event: 'job.lease_lost', ...base, outcome: f.outcome.kind },
        'lease was lost before the outcome was written; nothing changed',
      );
    } else if (what === 'completed') {
      log.debug({ event: 'job.completed', ...base }, 'job completed');
    } else if (what === 'retry') {
      const error = 'error' in f.outcome ? f.outcome.error : undefined;
      log.warn({ event: 'job.fail_retry', ...base, error, next_run_at: runAt?.toISOString() }, 'job failed; will retry');
    } else if (what === 'dead') {
      const error = 'error' in f.outcome ? f.outcome.error : undefined;
      log.error({ event: 'job.dead', ...base, error }, 'job is dead');
    } else {
      log.debug({ event: 'job.released', ...base, delay_ms: f.delayMs }, 'job handed back');
    }
    this.opts.onWritten?.(f, changed, what === 'retry' ? runAt : undefined);
  }
}
