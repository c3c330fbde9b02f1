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
  /**
   * Deliveries claimed ahead, per endpoint, oldest first: leased (in `running`, so the heartbeat
   * renews them) but not started until a slot of their endpoint frees (SlotBudget.queue).
   */
  private readonly waiting = new Map<string, Running[]>();
  private waitingCount = 0;
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
      // The next job of a key whose head finished here comes back claimed for this pool: it runs
      // as a claimed one does (waiting for its endpoint's slot if need be).
      ordering: {
        workerId: this.workerId,
        leaseMs: opts.leaseMs,
        channel: opts.channel,
        onHanded: (jobs) => {
          for (const job of jobs) this.runClaimed(job, false);
        },
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

  /** Jobs running here now (not counting deliveries claimed ahead that wait for a slot). */
  get inFlight(): number {
    return this.running.size - this.waitingCount;
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
  runClaimed(job: ClaimedJob, now = true): void {
    if (this.stopping) {
      void releaseJobs(this.opts.pool, [{ leased: { id: job.id, leaseToken: job.leaseToken }, delayMs: 0 }]).catch(() => undefined);
      return;
    }
    this.run(job, false, now);
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

  /**
   * Wake the claim loop; `fresh` says new work may exist (a NOTIFY, a timer, a poll). Endpoint
   * state that changed (a circuit opened or closed, a pause) wakes it too: deliveries claimed ahead
   * then start, or go back if their endpoint is held now.
   */
  wake(fresh = false): void {
    this.startWaiting(null);
    this.claims.wake(fresh);
  }

  /**
   * Start a leased job; `counted` when its endpoint slot was already taken by reserve(), `now` when
   * it must run whatever the slots say (a probe). A delivery claimed ahead of its endpoint's slots
   * waits here, leased, until one frees (startWaiting).
   */
  private run(job: ClaimedJob, counted = false, now = false): void {
    const entry: Running = { job, ctl: new AbortController(), leaseLost: false, shutdownAborted: false, expiresAt: job.leaseExpiresAt };
    // The same job under a new lease while an older run of it still goes on here: a dispatch redone
    // after a database crash lost its commit (same job id), or a job reaped and claimed again. The
    // newer lease is the only valid one, so the older run stops and commits nothing.
    const older = this.byJobId.get(job.id);
    if (older) this.heartbeat.lose(older, 'the job was claimed again under a newer lease');
    this.byJobId.set(job.id, entry);
    this.running.set(job.leaseToken, entry);
    this.log.debug({ event: 'job.claimed', job_id: job.id, type: job.type, attempt: job.attempts }, 'job claimed');
    if (!counted && !now && job.endpoint !== null && !this.slots.canStart(job.endpoint)) {
      const queue = this.waiting.get(job.endpoint);
      if (queue) queue.push(entry);
      else this.waiting.set(job.endpoint, [entry]);
      this.waitingCount++;
      this.slots.queue(job.endpoint);
      return;
    }
    if (!counted) this.slots.take(job.endpoint);
    this.launch(entry);
  }

  /** Start the deliveries claimed ahead that have a slot now, `first`'s endpoint before the others. */
  private startWaiting(first: string | null): void {
    if (this.waitingCount === 0 || this.stopping) return;
    const rest = [...this.waiting.keys()].filter((e) => e !== first);
    const order = first !== null && this.waiting.has(first) ? [first, ...rest] : rest;
    const handBack: Running[] = [];
    for (const ep of order) {
      const queue = this.waiting.get(ep)!;
      while (queue.length > 0) {
        const head = queue[0]!;
        if (head.leaseLost) {
          // Reaped and taken by another process meanwhile: nothing to run, nothing to write.
          this.unwait(queue.shift()!);
          this.forget(head);
          continue;
        }
        if (this.opts.held?.(ep)) {
          // Its endpoint is held now (circuit open, paused): every delivery waiting for it goes back, unspent.
          for (const e of queue.splice(0)) {
            this.unwait(e);
            handBack.push(e);
          }
          break;
        }
        if (!this.slots.canStart(ep)) break;
        queue.shift();
        this.unwait(head);
        this.slots.take(ep);
        this.launch(head);
      }
      if (queue.length === 0) this.waiting.delete(ep);
    }
    if (handBack.length > 0) this.handBack(handBack);
  }

  private unwait(entry: Running): void {
    this.waitingCount--;
    this.slots.dequeue(entry.job.endpoint!);
  }

  private forget(entry: Running): void {
    if (this.running.get(entry.job.leaseToken) === entry) this.running.delete(entry.job.leaseToken);
    if (this.byJobId.get(entry.job.id) === entry) this.byJobId.delete(entry.job.id);
  }

  /** Hand leased jobs that never started back to pending, attempt unspent (the reaper does it should this fail). */
  private handBack(entries: readonly Running[]): void {
    for (const e of entries) this.forget(e);
    void releaseJobs(
      this.opts.pool,
      entries.map((e) => ({ leased: { id: e.job.id, leaseToken: e.job.leaseToken }, delayMs: 0 })),
    ).catch(() => undefined);
    this.claims.wake(true);
  }

  /** Run a job's handler on the slot it holds. */
  private launch(entry: Running): void {
    const { job } = entry;
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
    // A slot came back: a delivery claimed ahead takes it at once, and the claim loop claims again
    // if the last claim was bound by it.
    this.startWaiting(job.endpoint);
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
    if (this.inFlight === 0) for (const r of this.idle.splice(0)) r();
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
    // Deliveries claimed ahead never started: back to pending at once, attempt unspent.
    const waiting = [...this.waiting.values()].flat();
    this.waiting.clear();
    for (const e of waiting) {
      this.unwait(e);
      this.forget(e);
    }
    if (waiting.length > 0) {
      await releaseJobs(
        this.opts.pool,
        waiting.map((e) => ({ leased: { id: e.job.id, leaseToken: e.job.leaseToken }, delayMs: 0 })),
      ).catch(() => undefined);
    }
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
