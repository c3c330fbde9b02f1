import type pg from 'pg';
import type { Endpoint } from '../config/index.js';
import type { Logger } from '../log.js';
import { claimProbes } from '../queue/transitions.js';
import type { ClaimedJob } from '../queue/types.js';
import { WEBHOOK_JOB } from '../webhook/job.js';
import { reopenCutProbes, reopenLateProbes } from './circuit-rows.js';
import type { CachedState, CircuitConfig } from './types.js';

/** A probe still running this long after its connect timeout and attempt timeout sends the circuit back to open. */
export const PROBE_MARGIN_MS = 5_000;

/** What a process needs from its worker pool to run a probe. */
export interface ProbeRunner {
  readonly workerId: string;
  readonly leaseMs: number;
  runClaimed(job: ClaimedJob): void;
  wake(fresh?: boolean): void;
}

export interface ProbesOptions {
  pool: pg.Pool;
  /** NOTIFY channel naming an endpoint whose row changed. */
  channel: string;
  circuit: CircuitConfig;
  log: Logger;
  /** How long an open endpoint with nothing due waits before it is looked at again. */
  refreshMs: number;
}

/**
 * The half-open side of the circuit breaker (docs/operations.md#circuit-breaker), as this process
 * takes part in it: it claims one probe for each open endpoint whose cool-down is over (the row
 * lock decides which process), knows which of its running jobs are probes, sends a half-open
 * circuit whose probe outlived its deadline back to open, and at stop lets another process probe
 * at once for the probes it cut short.
 */
export class Probes {
  /** Probe job id -> endpoint, for jobs this process claimed as probes. */
  private readonly byJob = new Map<string, string>();
  /** Probes of this process aborted (shutdown) before they could say anything. */
  private readonly abandoned = new Set<string>();

  constructor(private readonly opts: ProbesOptions) {}

  /** Is this job a probe this process claimed? (Its failure hands the job back unspent.) */
  has(jobId: string): boolean {
    return this.byJob.has(jobId);
  }

  /** A finished job: was it a probe of this process? It is one no longer. */
  settle(jobId: string): boolean {
    return this.byJob.delete(jobId);
  }

  /** A probe that said nothing (aborted at shutdown) settles nothing: stop() lets another process probe. */
  abandon(jobId: string): void {
    this.abandoned.add(jobId);
  }

  /** Claim one probe for each open endpoint configured (and enabled) here whose cool-down is over. */
  async claimDue(cache: ReadonlyMap<string, CachedState>, eps: ReadonlyMap<string, Endpoint>, runner: ProbeRunner): Promise<void> {
    const now = Date.now();
    const due: Array<{ name: string; deadlineMs: number }> = [];
    for (const [name, s] of cache) {
      const ep = eps.get(name);
      if (!ep || !ep.enabled || s.circuit !== 'open' || s.paused || s.nextProbeAt === null || s.nextProbeAt > now) continue;
      // The whole attempt: connecting (connect_timeout) comes before the attempt's own timeout starts.
      due.push({ name, deadlineMs: ep.connect_timeout + ep.timeout + PROBE_MARGIN_MS });
    }
    if (due.length === 0) return;
    const jobs = await claimProbes(this.opts.pool, {
      workerId: runner.workerId,
      leaseMs: runner.leaseMs,
      type: WEBHOOK_JOB,
      endpoints: due,
      channel: this.opts.channel,
    });
    for (const job of jobs) {
      this.byJob.set(job.id, job.endpoint ?? '');
      const s = cache.get(job.endpoint ?? '');
      if (s) s.circuit = 'half_open';
      this.opts.log.info(
        { event: 'endpoint.probe', endpoint: job.endpoint, job_id: job.id },
        `endpoint ${job.endpoint}: probing with one delivery`,
      );
      runner.runClaimed(job);
    }
    // Endpoints with nothing due stay open and are looked at again at the next refresh.
    for (const d of due) {
      const s = cache.get(d.name);
      if (s && s.circuit === 'open') s.nextProbeAt = now + this.opts.refreshMs;
    }
  }

  /**
   * A half-open circuit whose probe outlived its deadline (its worker died or hung) is open again.
   * Answers whether any was (the cache is then stale).
   */
  async expireLate(cache: ReadonlyMap<string, CachedState>): Promise<boolean> {
    const now = Date.now();
    const late = [...cache]
      .filter(([, s]) => s.circuit === 'half_open' && s.probeDeadline !== null && s.probeDeadline <= now)
      .map(([n]) => n);
    if (late.length === 0) return false;
    const reopened = await reopenLateProbes(this.opts.pool, late, this.opts.circuit, this.opts.channel);
    for (const r of reopened) {
      this.opts.log.warn(
        {
          event: 'endpoint.circuit_opened',
          endpoint: r.endpoint,
          from: 'half_open',
          to: 'open',
          reason: 'probe_deadline',
          cooldown_ms: r.cooldown_ms,
        },
        `endpoint ${r.endpoint}: probe outlived its deadline, circuit open again`,
      );
    }
    return reopened.length > 0;
  }

  /**
   * At stop: probes cut short by it settle nothing, so let another process probe at once rather
   * than wait out the deadline (which would also double the cool-down).
   */
  async cutShort(): Promise<void> {
    await reopenCutProbes(this.opts.pool, [...this.byJob.keys(), ...this.abandoned]);
  }
}
