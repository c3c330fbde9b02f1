import type pg from 'pg';
import { DoublingDelay, Wakeup } from '../delay.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { EveryMinute, refusesWrites } from '../log-throttle.js';
import { ClaimTimers } from './claim-timers.js';
import { slotsUsedUp, type ClaimPlan, type SlotBudget } from './slots.js';
import { nextDueIn, pendingEndpoints } from './store.js';
import { claimJobs, releaseJobs } from './transitions.js';
import { tracing } from '../tracing/runtime.js';
import type { ClaimedJob } from './types.js';

export interface ClaimLoopOptions {
  pool: pg.Pool;
  workerId: string;
  leaseMs: number;
  pollMs: number;
  /** The job types the pool has handlers for, read at every claim. */
  types: () => string[];
  /** The pool's slot accounting: what a claim may take. */
  slots: SlotBudget;
  /** The endpoint gate's caps, if any: endpoints with pending jobs but no cap here are looked for beside the claims. */
  endpointLimits?: (() => ReadonlyMap<string, number>) | undefined;
  log: Logger;
  /** Start a claimed job (its slot is taken then). */
  run: (job: ClaimedJob) => void;
}

/**
 * A worker pool's claims: when it claims, and how much. Each rule measured in
 * bench/README.md#tuning-notes:
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
 * - Deliveries are claimed ahead: up to a cap's worth per endpoint beyond its free slots, leased
 *   and waiting in the pool (SlotBudget.queue), so a freed slot starts the next one with no claim
 *   in between, and the claim for more comes once half a cap of that room is free.
 * - Fresh events skip all of this: the fan-out inserts the jobs this pool has room for as running
 *   and hands them over after commit (Handover, reserve/adopt).
 * - The poll (`jobs.poll_interval`) is only the fallback for a lost NOTIFY or LISTEN connection.
 */
export class ClaimLoop {
  private stopping = false;
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
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly opts: ClaimLoopOptions) {
    this.timers = new ClaimTimers({ pollMs: opts.pollMs, wake: () => this.wake(true) });
  }

  start(): void {
    this.done = this.loop();
  }

  /** Stop claiming: a claim under way hands its jobs back, attempt unspent (`ended` says when the loop is over). */
  halt(): void {
    this.stopping = true;
    this.wake();
    this.timers.stop();
  }

  /** The loop's end, after halt(). */
  get ended(): Promise<void> {
    return this.done;
  }

  /** Wake the claim loop; `fresh` says new work may exist (a NOTIFY, a timer, a poll). */
  wake(fresh = false): void {
    if (fresh) this.markFresh();
    this.wakeup.wake();
  }

  /** A job falls due in `ms` (a retry just written): claim then, if that is before the next poll. */
  dueIn(ms: number): void {
    this.timers.due(ms);
  }

  /** A claimed job finished and gave its slot back: claim again if the last claim was bound by that budget. */
  finished(job: ClaimedJob): void {
    if (job.endpoint === null && this.appsBound) {
      // The last claim filled the application jobs' budget: the queue may have more of them.
      this.appsBound = false;
      this.wake(true);
    }
    if (job.endpoint !== null) {
      // A slot came back while the last claim was bound by slots: there may be work for it.
      // Claim once a quarter of the endpoint's cap is free (or 2 ms after the first slot), so a
      // capped endpoint is refilled in batches rather than one claim per finished job.
      if (this.slotBound) this.refillSoon(job.endpoint);
    }
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
    return this.opts.slots.beginClaim(this.unknownEndpoints);
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
    const { slots } = this.opts;
    const onError = new DoublingDelay(100, this.opts.pollMs);
    while (!this.stopping) {
      if (!slots.hasRoom() || !this.lastClaimFull) {
        await this.waitForWake(this.opts.pollMs);
        continue;
      }
      this.wakeup.clear();
      const gen = this.freshGen;
      let jobs: ClaimedJob[];
      let plan: ClaimPlan;
      try {
        plan = this.planClaim();
        const startMs = tracing === null ? 0 : Date.now();
        jobs = await claimJobs(this.opts.pool, {
          workerId: this.opts.workerId,
          leaseMs: this.opts.leaseMs,
          types: this.opts.types(),
          plan,
        });
        tracing?.claimed(startMs, jobs.length);
        onError.reset();
        this.refusals.reset('claim');
      } catch (err) {
        slots.endClaim();
        // A database refusing writes fails every claim until fixed: said once a minute, with the count skipped.
        const skipped = refusesWrites(err) ? this.refusals.pass('claim') : 0;
        if (skipped !== undefined)
          this.opts.log.warn(
            { event: 'job.claim_error', err: coerceError(err).message, ...(skipped > 0 ? { repeated: skipped } : {}) },
            'claim failed; retrying',
          );
        await this.waitForWake(onError.next());
        continue;
      }
      if (this.stopping) {
        // Claimed while the stop began: hand them straight back, attempt unspent.
        slots.endClaim();
        await releaseJobs(
          this.opts.pool,
          jobs.map((j) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, delayMs: 0 })),
        ).catch(() => undefined);
        break;
      }
      slots.endClaim();
      for (const job of jobs) this.opts.run(job);
      // With two budgets, application jobs can fill theirs (jobs.workers) while the claim as a whole
      // is short: more of them may be waiting, so a finished one claims again (see finished()).
      if (plan.endpoints && plan.workers > 0) this.appsBound = jobs.filter((j) => j.endpoint === null).length >= plan.workers;
      // A short claim means the queue is drained for us, unless new work was signalled meanwhile.
      if (jobs.length < plan.total && this.freshGen === gen) {
        this.lastClaimFull = false;
        // Short because an endpoint used up its slots (not because the queue is empty): its next
        // finished job frees a slot, and that is the moment to claim again.
        this.slotBound = slotsUsedUp(plan.endpoints, jobs);
        this.rateWait(plan, jobs);
        // Bound by a cap, the capped endpoint's next finished job is what frees its work, but
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

  private refillSoon(endpoint: string): void {
    const { slots } = this.opts;
    const cap = slots.cap(endpoint);
    const waiting = slots.waiting(endpoint);
    if (cap !== undefined && waiting > 0) {
      // The slot went to a delivery claimed ahead: claim again once half a cap of room ahead is free,
      // so claims carry half a cap or more rather than one row per finished job.
      if (cap - waiting >= Math.max(1, Math.floor(cap / 2))) {
        this.slotBound = false;
        this.wake(true);
      }
      return;
    }
    const free = cap === undefined ? Infinity : cap - slots.used(endpoint);
    this.timers.refill(free, cap, () => {
      if (!this.slotBound) return;
      this.slotBound = false;
      this.wake(true);
    });
  }
}
