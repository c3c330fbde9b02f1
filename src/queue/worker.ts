import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { PermanentError, coerceError } from '../errors.js';
import { listenOn, type Subscription } from '../db/listen-hub.js';
import { silentLogger, type Logger } from '../log.js';
import { outcomeDelay } from './backoff.js';
import { ClaimLoop } from './claim-loop.js';
import { Flusher } from './flusher.js';
import { Heartbeat, type Running } from './heartbeat.js';
import { SlotBudget } from './slots.js';
import { releaseJobs } from './transitions.js';
import type { JobContext, JobHandler, OutcomeHandler } from './handler.js';
import type { ClaimedJob, JobOutcome } from './types.js';
import type { WorkerPoolOptions } from './worker-options.js';

export type { JobContext, JobHandler, OutcomeHandler, WorkerPoolOptions };

export function makeWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * A pool of `concurrency` jobs in flight in this process: claims in batches (ClaimLoop, which says
 * when and how much), writes outcomes in batches (Flusher), renews every lease in one statement
 * (Heartbeat). Jobs also arrive claimed on dispatch (reserve/adopt, for the fan-out's Handover) and
 * as the circuit breaker's probes (runClaimed). Its view of endpoints is its endpoint gate
 * (endpoint-gate.ts), read through its slot accounting (SlotBudget).
 */
export class WorkerPool {
  readonly workerId: string;
  private readonly log: Logger;
  private readonly handlers: Record<string, JobHandler | OutcomeHandler>;
  /** Jobs leased here, by lease token: one job id can be leased twice for a moment (see run()). */
  private readonly running = new Map<string, Running>();
  /** The newest entry per job id. */
  private readonly byJobId = new Map<string, Running>();
  private readonly slots: SlotBudget;
  private readonly flusher: Flusher;
  private listener: Subscription | null = null;
  private stopping = false;
  private started = false;
  private readonly claims: ClaimLoop;
  private readonly heartbeat: Heartbeat;
  private idle: Array<() => void> = [];

  constructor(private readonly opts: WorkerPoolOptions) {
    this.handlers = { ...opts.handlers };
    this.workerId = opts.workerId ?? makeWorkerId();
    this.log = (opts.log ?? silentLogger).child({ worker: this.workerId });
    this.slots = new SlotBudget({
      workers: opts.concurrency,
      deliveries: opts.deliveries,
      caps: opts.endpointLimits,
      degraded: opts.degraded,
      held: opts.held,
      rates: opts.rates,
    });
    this.flusher = new Flusher({
      pool: opts.pool,
      log: this.log,
      onDead: opts.onDead,
      onWritten: (f, changed, runAt) => {
        opts.onFinished?.(f, changed, runAt);
        if (runAt) this.claims.dueIn(runAt.getTime() - Date.now());
      },
    });
    this.heartbeat = new Heartbeat({
      pool: opts.pool,
      leaseMs: opts.leaseMs,
      log: this.log,
      running: this.running,
      needed: () => !(this.stopping && this.running.size === 0 && this.flusher.idle),
    });
    this.claims = new ClaimLoop({
      pool: opts.pool,
      workerId: this.workerId,
      leaseMs: opts.leaseMs,
      pollMs: opts.pollMs,
      types: () => Object.keys(this.handlers),
      slots: this.slots,
      endpointLimits: opts.endpointLimits,
      log: this.log,
      run: (job) => this.run(job),
    });
  }

  /** Run jobs of `type` with `handler`; before start() only, one handler per type. */
  registerHandler(type: string, handler: JobHandler): this {
    if (this.started) throw new Error(`registerHandler(${type}): the pool has started; register handlers before start()`);
    if (this.handlers[type]) throw new Error(`registerHandler(${type}): a handler for this type is registered already`);
    this.handlers[type] = handler;
    return this;
  }

  get inFlight(): number {
    return this.running.size;
  }

  /** Deliveries of one endpoint in flight in this process now. */
  inFlightFor(endpoint: string): number {
    return this.slots.used(endpoint);
  }

  /** A claim is in flight (reserve() hands out no slot meanwhile). */
  get claiming(): boolean {
    return this.slots.claiming;
  }

  /** Lease length jobs inserted for adopt() must be given. */
  get leaseMs(): number {
    return this.opts.leaseMs;
  }

  /**
   * Take one slot, if this pool has one free for a job of this type and endpoint, for a job the
   * caller is about to insert as `running` under this pool's worker id (claim on dispatch). Each
   * slot taken must come back through adopt() (after commit) or unreserve() (after rollback).
   */
  reserve(type: string, endpoint: string | null): boolean {
    if (!this.started || this.stopping || !this.handlers[type]) return false;
    return this.slots.reserve(endpoint);
  }

  /** Give back slots reserved for jobs that were not written after all (the transaction rolled back). */
  unreserve(endpoints: ReadonlyArray<string | null>): void {
    for (const ep of endpoints) this.slots.drop(ep);
    this.wake(true);
  }

  /**
   * Run jobs that were inserted as `running` under this pool's worker id and committed, each on a
   * slot taken by reserve(). After stop() began they are handed back at once, attempt unspent.
   */
  async adopt(jobs: readonly ClaimedJob[]): Promise<void> {
    if (this.stopping) {
      for (const j of jobs) this.slots.drop(j.endpoint);
      // If this fails too, the reaper hands them back once the lease runs out.
      await releaseJobs(
        this.opts.pool,
        jobs.map((j) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, delayMs: 0 })),
      ).catch(() => undefined);
      return;
    }
    for (const job of jobs) this.run(job, true);
  }

  /**
   * Run a job this pool's worker id has claimed outside the claim loop (a circuit breaker's probe,
   * claimProbes), on a slot taken now. After stop() began it is handed back at once, attempt unspent.
   */
  runClaimed(job: ClaimedJob): void {
    if (this.stopping) {
      void releaseJobs(this.opts.pool, [{ leased: { id: job.id, leaseToken: job.leaseToken }, delayMs: 0 }]).catch(() => undefined);
      return;
    }
    this.run(job);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.listener = await listenOn(this.opts.listenHub, { url: this.opts.url, log: this.log }, this.opts.channel, {
      onNotify: () => this.wake(true),
      onReconnect: () => this.wake(true),
    });
    this.heartbeat.start();
    this.claims.start();
  }

  /** Wake the claim loop; `fresh` says new work may exist (a NOTIFY, a timer, a poll). */
  wake(fresh = false): void {
    this.claims.wake(fresh);
  }

  /** Start a leased job; `counted` when its endpoint slot was already taken by reserve(). */
  private run(job: ClaimedJob, counted = false): void {
    const entry: Running = { job, ctl: new AbortController(), leaseLost: false, shutdownAborted: false, expiresAt: job.leaseExpiresAt };
    // The same job under a new lease while an older run of it still goes on here: a dispatch redone
    // after a database crash lost its commit (same job id), or a job reaped and claimed again. The
    // newer lease is the only valid one, so the older run stops and commits nothing.
    const older = this.byJobId.get(job.id);
    if (older) this.heartbeat.lose(older, 'the job was claimed again under a newer lease');
    this.byJobId.set(job.id, entry);
    this.running.set(job.leaseToken, entry);
    if (!counted) this.slots.take(job.endpoint);
    this.log.debug({ event: 'job.claimed', job_id: job.id, type: job.type, attempt: job.attempts }, 'job claimed');
    const handler = this.handlers[job.type];
    const started = handler
      ? Promise.resolve().then(() => handler(job, { signal: entry.ctl.signal, log: this.log }))
      : Promise.reject(new PermanentError(`no handler for job type ${job.type}`));
    void started.then(
      (out) => this.finish(entry, out ?? { kind: 'complete' }),
      (err: unknown) => {
        const e = coerceError(err);
        this.finish(entry, e instanceof PermanentError ? { kind: 'permanent', error: e.message } : { kind: 'retry', error: e.message });
      },
    );
  }

  private finish(entry: Running, outcome: JobOutcome): void {
    const { job } = entry;
    if (this.running.get(job.leaseToken) !== entry) return; // already handed back by a forced shutdown
    this.running.delete(job.leaseToken);
    if (this.byJobId.get(job.id) === entry) this.byJobId.delete(job.id);
    this.slots.drop(job.endpoint);
    try {
      this.opts.onOutcome?.(job, outcome);
    } catch (err) {
      // An observer's bug must not cost the outcome: it is written whatever happens here.
      this.log.error({ event: 'job.observer_error', job_id: job.id, err: coerceError(err).message }, 'outcome observer failed');
    }
    // A slot came back: the claim loop claims again if the last claim was bound by it.
    this.claims.finished(job);
    let out = outcome;
    if ((entry.shutdownAborted || entry.leaseLost) && out.kind !== 'complete') {
      // Cut short by us (shutdown, or a lease we could no longer prove): hand it back without
      // spending the attempt. If another worker really has it leased now, the guarded write is a no-op.
      out = {
        kind: 'release',
        delayMs: 0,
        error: entry.shutdownAborted ? 'shutdown before the attempt finished' : 'lease lost before the attempt finished',
        ...(out.attempt ? { attempt: { ...out.attempt, aborted: true } } : {}),
      };
    }
    const delayMs = outcomeDelay(this.opts.retry, job.attempts, out);
    this.flusher.push({ job, outcome: out, delayMs, leaseLost: entry.leaseLost });
    this.wake();
    if (this.running.size === 0) for (const r of this.idle.splice(0)) r();
  }

  /**
   * Stop claiming, let in-flight jobs finish within the grace, then abort the rest (their HTTP
   * requests included) and hand them back without spending their attempt.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.claims.halt();
    await this.listener?.close();
    await this.claims.ended;
    if (this.running.size > 0) {
      const drained = new Promise<void>((r) => this.idle.push(r));
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), this.opts.shutdownGraceMs))),
      ]);
      clearTimeout(timer);
      if (timedOut && this.running.size > 0) {
        this.log.warn(
          { event: 'jobs.module.shutdown_timeout', in_flight: this.running.size, job_ids: [...this.running.values()].map((r) => r.job.id) },
          'shutdown grace ran out; aborting and handing back unfinished jobs',
        );
        for (const r of this.running.values()) {
          r.shutdownAborted = true;
          r.ctl.abort(new Error('shutdown'));
        }
        // Handlers that honour the signal settle at once; hand back any that do not.
        await Promise.race([new Promise<void>((r) => this.idle.push(r)), new Promise((r) => setTimeout(r, 1_000))]);
        // finish() deletes from the map; a Map iterator tolerates that.
        for (const r of this.running.values()) this.finish(r, { kind: 'release', delayMs: 0, error: 'shutdown' });
      }
    }
    // Bounded: with the database gone, the outcomes stay running and the reaper hands them back.
    const drained = await Promise.race([this.flusher.drain().then(() => true), new Promise<boolean>((r) => setTimeout(r, 10_000, false))]);
    if (!drained) this.log.warn({ event: 'job.write_error', jobs: this.flusher.pending }, 'could not write every outcome before stopping');
    this.heartbeat.stop();
  }
}
