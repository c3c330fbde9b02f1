import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { DoublingDelay, Wakeup } from '../delay.js';
import { PermanentError, coerceError } from '../errors.js';
import { Listener } from '../db/listener.js';
import { silentLogger, type Logger } from '../log.js';
import { EveryMinute, refusesWrites } from '../log-throttle.js';
import { outcomeDelay } from './backoff.js';
import { ClaimTimers } from './claim-timers.js';
import { Flusher } from './flusher.js';
import { Heartbeat, type Running } from './heartbeat.js';
import { SlotBudget, slotsUsedUp, type ClaimPlan } from './slots.js';
import { nextDueIn, pendingEndpoints } from './store.js';
import { claimJobs, releaseJobs } from './transitions.js';
import type { JobContext, JobHandler, OutcomeHandler } from './handler.js';
import type { ClaimedJob, JobOutcome } from './types.js';
import type { WorkerPoolOptions } from './worker-options.js';

export type { JobContext, JobHandler, OutcomeHandler, WorkerPoolOptions };

export function makeWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * A pool of `concurrency` jobs in flight in this process: claims in batches, writes outcomes in
 * batches (Flusher), renews every lease in one statement (Heartbeat).
 *
 * When it claims, and why (each rule measured in bench/README.md#tuning-notes):
 * - One claim in flight at a time: jobs that finish while a claim runs make the next claim bigger.
 *   Per-row work dominates PostgreSQL's cost, so bigger batches are what raised throughput.
 * - It claims only with free slots and a reason to believe work exists: the last claim came back
 *   full, or something signalled new work since (a NOTIFY, the due timer, the fallback poll). A
 *   short claim means the queue is drained for this pool, unless a signal landed while it ran
 *   (`freshGen` counts them), so an idle pool does not spin on empty claims.
 * - After a short claim it reads when the next pending job falls due (the head of the due index)
 *   and sets a timer for it, so a retry due in 300 ms runs then, not at the next poll.
 * - A claim cut short by an endpoint's `max_in_flight` (not by an empty queue) skips that read:
 *   the next finished job of that endpoint is what frees work, and the pool claims again once a
 *   quarter of the endpoint's cap is free, or 2 ms after the first slot came back (refillSoon), so
 *   a capped endpoint is refilled in batches rather than one claim per finished job.
 * - Fresh events skip all of this: the fan-out inserts the jobs this pool has room for as running
 *   and hands them over after commit (Handover, reserve/adopt).
 * - The poll (`jobs.poll_interval`) is only the fallback for a lost NOTIFY or LISTEN connection.
 */
export class WorkerPool {
  readonly workerId: string;
  private readonly log: Logger;
  private readonly handlers: Record<string, JobHandler | OutcomeHandler>;
  /** Jobs held, by lease token: one job id can be held twice for a moment (see run()). */
  private readonly running = new Map<string, Running>();
  /** The newest entry per job id. */
  private readonly byJobId = new Map<string, Running>();
  private readonly slots: SlotBudget;
  private readonly flusher: Flusher;
  private listener: Listener | null = null;
  private stopping = false;
  private started = false;
  private readonly wakeup = new Wakeup();
  /** claim_error lines while the database refuses writes: once a minute. */
  private readonly refusals = new EveryMinute();
  private lastClaimFull = true;
  /** Counts "new work may exist" signals, so one that lands while a claim runs is not lost. */
  private freshGen = 0;
  private unknownEndpoints: string[] = [];
  private slotBound = false;
  /** The last claim filled jobs.workers with application jobs (not short for them, whatever the total). */
  private appsBound = false;
  /** When the due index was last read after a short claim. */
  private dueReadAt = -Infinity;
  private discoveredAt = -Infinity;
  /** Per rate-limited endpoint: claims in a row that found nothing for it (its retry wait doubles). */
  private readonly rateIdle = new Map<string, number>();
  private discovering = false;
  private readonly timers: ClaimTimers;
  private readonly heartbeat: Heartbeat;
  private loopDone: Promise<void> = Promise.resolve();
  private idle: Array<() => void> = [];

  constructor(private readonly opts: WorkerPoolOptions) {
    this.handlers = { ...opts.handlers };
    this.workerId = opts.workerId ?? makeWorkerId();
    this.log = (opts.log ?? silentLogger).child({ worker: this.workerId });
    this.timers = new ClaimTimers({ pollMs: opts.pollMs, wake: () => this.wake(true) });
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
        if (runAt) this.timers.due(runAt.getTime() - Date.now());
      },
    });
    this.heartbeat = new Heartbeat({
      pool: opts.pool,
      leaseMs: opts.leaseMs,
      log: this.log,
      running: this.running,
      needed: () => !(this.stopping && this.running.size === 0 && this.flusher.idle),
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
        jobs.map((j) => ({ held: { id: j.id, leaseToken: j.leaseToken }, delayMs: 0 })),
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
      void releaseJobs(this.opts.pool, [{ held: { id: job.id, leaseToken: job.leaseToken }, delayMs: 0 }]).catch(() => undefined);
      return;
    }
    this.run(job);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.listener = new Listener({
      url: this.opts.url,
      channels: [this.opts.channel],
      log: this.log,
      onNotify: () => this.wake(true),
      onReconnect: () => this.wake(true),
    });
    await this.listener.start();
    this.heartbeat.start();
    this.loopDone = this.loop();
  }

  /** Wake the claim loop; `fresh` says new work may exist (a NOTIFY, a timer, a poll). */
  wake(fresh = false): void {
    if (fresh) this.markFresh();
    this.wakeup.wake();
  }

  private markFresh(): void {
    this.lastClaimFull = true;
    this.freshGen++;
  }

  /** Wait for a wake-up; with none within `ms`, look anyway (the fallback poll). */
  private async waitForWake(ms: number): Promise<void> {
    if (!(await this.wakeup.wait(ms))) this.markFresh();
  }

  /**
   * What the next claim may take (SlotBudget.beginClaim): the endpoints' caps, plus (uncapped)
   * endpoints that have pending jobs but are not configured here, as last found by discover().
   */
  private planClaim(): ClaimPlan {
    this.discover();
    return this.slots.beginClaim(this.unknownEndpoints);
  }

  /**
   * Look for endpoints with pending jobs that are not configured here, at most once per poll
   * interval, beside the claims rather than before one: a claim woken by a NOTIFY never waits for
   * this read. When it finds one the last claim could not know of, the loop claims again.
   */
  private discover(): void {
    const limits = this.opts.endpointLimits?.();
    if (!limits || this.discovering || Date.now() - this.discoveredAt < this.opts.pollMs) return;
    this.discoveredAt = Date.now();
    this.discovering = true;
    pendingEndpoints(this.opts.pool)
      .then(
        (eps) => {
          const found = eps.filter((e) => !limits.has(e));
          const added = found.some((e) => !this.unknownEndpoints.includes(e));
          this.unknownEndpoints = found;
          if (added) this.wake(true);
        },
        () => undefined, // Keep the last list; the next look tries again.
      )
      .finally(() => (this.discovering = false));
  }

  private async loop(): Promise<void> {
    const onError = new DoublingDelay(100, this.opts.pollMs);
    while (!this.stopping) {
      if (!this.slots.hasRoom() || !this.lastClaimFull) {
        await this.waitForWake(this.opts.pollMs);
        continue;
      }
      this.wakeup.clear();
      const gen = this.freshGen;
      let jobs: ClaimedJob[];
      let plan: ClaimPlan;
      try {
        plan = this.planClaim();
        jobs = await claimJobs(this.opts.pool, {
          workerId: this.workerId,
          leaseMs: this.opts.leaseMs,
          types: Object.keys(this.handlers),
          plan,
        });
        onError.reset();
        this.refusals.reset('claim');
      } catch (err) {
        this.slots.endClaim();
        // A database refusing writes fails every claim until fixed: said once a minute, with the count skipped.
        const skipped = refusesWrites(err) ? this.refusals.pass('claim') : 0;
        if (skipped !== undefined)
          this.log.warn(
            { event: 'job.claim_error', err: coerceError(err).message, ...(skipped > 0 ? { repeated: skipped } : {}) },
            'claim failed; retrying',
          );
        await this.waitForWake(onError.next());
        continue;
      }
      if (this.stopping) {
        // Claimed while the stop began: hand them straight back, attempt unspent.
        this.slots.endClaim();
        await releaseJobs(
          this.opts.pool,
          jobs.map((j) => ({ held: { id: j.id, leaseToken: j.leaseToken }, delayMs: 0 })),
        ).catch(() => undefined);
        break;
      }
      this.slots.endClaim();
      for (const job of jobs) this.run(job);
      // With two budgets, application jobs can fill theirs (jobs.workers) while the claim as a whole
      // is short: more of them may be waiting, so a finished one claims again (see finish()).
      if (plan.endpoints && plan.workers > 0) this.appsBound = jobs.filter((j) => j.endpoint === null).length >= plan.workers;
      // A short claim means the queue is drained for us, unless new work was signalled meanwhile.
      if (jobs.length < plan.total && this.freshGen === gen) {
        this.lastClaimFull = false;
        // Short because an endpoint used up its slots (not because the queue is empty): its next
        // finished job frees a slot, and that is the moment to claim again.
        this.slotBound = slotsUsedUp(plan.endpoints, jobs);
        this.rateWait(plan, jobs);
        // Held back by a cap, the capped endpoint's next finished job is what frees its work, but
        // another endpoint's job may fall due before: look at the due index then too, at most every
        // 250 ms (a capped endpoint is claimed again every few finished jobs).
        if (!this.slotBound || Date.now() - this.dueReadAt >= 250) {
          this.dueReadAt = Date.now();
          try {
            const due = await nextDueIn(this.opts.pool);
            if (due !== null && due > 0) this.timers.due(due);
          } catch {
            // The poll covers it.
          }
        }
      }
    }
  }

  /**
   * A rate-limited endpoint that got fewer jobs than it had slots may have run out of tokens, not
   * of jobs: claim again when its next token is due (1/rate). One that got none may simply have no
   * jobs, so its wait doubles each time up to the poll interval (new jobs send a NOTIFY anyway).
   */
  private rateWait(plan: ClaimPlan, jobs: readonly ClaimedJob[]): void {
    const rates = plan.rates;
    if (!rates || !plan.endpoints) return;
    const got = new Map<string, number>();
    for (const j of jobs) if (j.endpoint !== null) got.set(j.endpoint, (got.get(j.endpoint) ?? 0) + 1);
    let wait = Infinity;
    for (const [ep, rate] of rates) {
      const offered = plan.endpoints.get(ep) ?? 0;
      if (rate <= 0 || offered <= 0) continue;
      const k = got.get(ep) ?? 0;
      if (k >= offered) continue;
      const idle = k > 0 ? 0 : Math.min(6, (this.rateIdle.get(ep) ?? 0) + 1);
      this.rateIdle.set(ep, idle);
      wait = Math.min(wait, Math.min(this.opts.pollMs, Math.max(5, 1000 / rate) * 2 ** Math.max(0, idle - 1)));
    }
    if (wait < Infinity) this.timers.due(wait);
  }

  /** Start a held job; `counted` when its endpoint slot was already taken by reserve(). */
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
    if (job.endpoint === null && this.appsBound) {
      // The last claim filled the application jobs' budget: the queue may hold more of them.
      this.appsBound = false;
      this.wake(true);
    }
    if (job.endpoint !== null) {
      // A slot came back while the last claim was held back by slots: there may be work for it.
      // Claim once a quarter of the endpoint's cap is free (or 2 ms after the first slot), so a
      // capped endpoint is refilled in batches rather than one claim per finished job.
      if (this.slotBound) this.refillSoon(job.endpoint);
    }
    let out = outcome;
    if ((entry.shutdownAborted || entry.leaseLost) && out.kind !== 'complete') {
      // Cut short by us (shutdown, or a lease we could no longer prove): hand it back without
      // spending the attempt. If another worker really holds it now, the guarded write is a no-op.
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

  private refillSoon(endpoint: string): void {
    const cap = this.slots.cap(endpoint);
    const free = cap === undefined ? Infinity : cap - this.slots.used(endpoint);
    this.timers.refill(free, cap, () => {
      if (!this.slotBound) return;
      this.slotBound = false;
      this.wake(true);
    });
  }

  /**
   * Stop claiming, let in-flight jobs finish within the grace, then abort the rest (their HTTP
   * requests included) and hand them back without spending their attempt.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.wake();
    this.timers.stop();
    await this.listener?.close();
    await this.loopDone;
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
