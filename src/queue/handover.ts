import type pg from 'pg';
import { withTransaction, type TransactionOptions } from '../db/pool.js';
import type { LeaseOptions } from './transitions.js';
import type { ClaimedJob, NewJob } from './types.js';

/** What the fan-out needs of a worker pool to hand it jobs directly (WorkerPool implements it). */
export interface JobAdopter {
  readonly workerId: string;
  readonly leaseMs: number;
  reserve(type: string, endpoint: string | null): boolean;
  unreserve(endpoints: ReadonlyArray<string | null>): void;
  adopt(jobs: readonly ClaimedJob[]): Promise<void>;
}

/**
 * Claim on dispatch: a job this process's pool has a free slot for is inserted as `running` under
 * the pool's worker id and handed to the pool once the transaction commits, instead of going in as
 * `pending` and coming back through NOTIFY, wake-up and a claim. One per transaction; it is slot
 * accounting, so it lives with the pool's other accounting.
 */
export class Handover {
  private reservedEndpoints: Array<string | null> = [];
  /** Jobs inserted as running under the pool's lease, to hand over at commit. */
  private leased: ClaimedJob[] = [];

  constructor(private readonly adopter: JobAdopter | null) {}

  /** Reserve pool slots for as many of these jobs as fit; they must carry ids. Those go in leased to the pool. */
  reserve(jobs: readonly NewJob[]): LeaseOptions | undefined {
    const a = this.adopter;
    if (!a) return undefined;
    const ids = new Set<string>();
    for (const j of jobs) {
      if (j.id === undefined || j.delayMs) continue;
      if (!a.reserve(j.type, j.endpoint ?? null)) continue;
      ids.add(j.id);
      this.reservedEndpoints.push(j.endpoint ?? null);
    }
    return ids.size > 0 ? { workerId: a.workerId, leaseMs: a.leaseMs, ids } : undefined;
  }

  inserted(jobs: readonly ClaimedJob[]): void {
    this.leased.push(...jobs);
  }

  /** After commit: the pool runs the leased jobs; any slot reserved without a row comes back. */
  async commit(): Promise<void> {
    const a = this.adopter;
    if (!a || this.reservedEndpoints.length === 0) return;
    const unused = [...this.reservedEndpoints];
    for (const j of this.leased) {
      const k = unused.indexOf(j.endpoint);
      if (k >= 0) unused.splice(k, 1);
    }
    this.reservedEndpoints = [];
    if (unused.length > 0) a.unreserve(unused);
    const leased = this.leased;
    this.leased = [];
    await a.adopt(leased);
  }

  /** After a rollback (or a failed commit): nothing was written, every reserved slot comes back. */
  rollback(): void {
    if (this.adopter && this.reservedEndpoints.length > 0) this.adopter.unreserve(this.reservedEndpoints);
    this.reservedEndpoints = [];
    this.leased = [];
  }
}

/**
 * One transaction with its Handover: the leased jobs go to the pool after commit, their slots come
 * back after a rollback. If a COMMIT's reply is lost the jobs may exist, running under our worker
 * id with nobody working them: the reaper hands them back when their lease runs out.
 */
export async function handoverTransaction<T>(
  pool: pg.Pool,
  adopter: JobAdopter | null,
  fn: (client: pg.PoolClient, h: Handover, nowMs: number) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  const handover = new Handover(adopter);
  let result: T;
  try {
    result = await withTransaction(pool, (client, nowMs) => fn(client, handover, nowMs), opts);
  } catch (err) {
    handover.rollback();
    throw err;
  }
  await handover.commit();
  return result;
}
