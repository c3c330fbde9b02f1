import type pg from 'pg';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { renewLeases } from './transitions.js';
import type { ClaimedJob } from './types.js';

/** A job this process has leased: claimed, running or waiting for its outcome to be written. */
export interface Running {
  job: ClaimedJob;
  ctl: AbortController;
  leaseLost: boolean;
  shutdownAborted: boolean;
  /** Local-clock expiry from the last renewal the database confirmed. */
  expiresAt: number;
}

export interface HeartbeatOptions {
  pool: pg.Pool;
  leaseMs: number;
  log: Logger;
  /** The jobs leased now, by lease token; read at every tick. */
  running: ReadonlyMap<string, Running>;
  /** False once there is nothing left to keep alive (the pool stopped and drained). */
  needed: () => boolean;
}

/**
 * One timer per process renews every lease in one statement every `lease_timeout / 3`. While a
 * renewal fails or hangs (a dead connection), leases are judged by their last database-issued
 * expiry instead: a short blip loses nothing, a long one cannot keep a lost lease alive. A lost
 * lease aborts its job (its HTTP request included); its outcome then changes nothing.
 */
export class Heartbeat {
  private timer: NodeJS.Timeout | null = null;
  private renewing = false;
  private stopped = false;

  constructor(private readonly opts: HeartbeatOptions) {}

  private get interval(): number {
    return Math.max(10, Math.floor(this.opts.leaseMs / 3));
  }

  start(): void {
    this.schedule(this.interval);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  lose(r: Running, why: string): void {
    if (r.leaseLost) return;
    r.leaseLost = true;
    this.opts.log.warn({ event: 'job.lease_lost', job_id: r.job.id, why }, 'lease lost; the job will commit nothing');
    r.ctl.abort(new Error('lease lost'));
  }

  private schedule(ms: number): void {
    if (this.stopped || !this.opts.needed()) return;
    this.timer = setTimeout(() => this.tick(), ms);
    this.timer.unref();
  }

  /** Leases past their last database-issued expiry (minus a margin) count as lost. */
  private judgeExpiries(why: string): void {
    const margin = Math.min(1_000, this.opts.leaseMs / 10);
    const now = Date.now();
    for (const r of this.opts.running.values()) {
      if (!r.leaseLost && r.expiresAt - margin <= now) this.lose(r, why);
    }
  }

  private tick(): void {
    const { running, log } = this.opts;
    const interval = this.interval;
    if (this.renewing) {
      this.judgeExpiries('lease expired while its renewal hung');
      this.schedule(interval);
      return;
    }
    const leased = [...running.values()].filter((r) => !r.leaseLost);
    if (leased.length === 0) {
      this.schedule(interval);
      return;
    }
    this.renewing = true;
    renewLeases(
      this.opts.pool,
      leased.map((r) => ({ id: r.job.id, leaseToken: r.job.leaseToken })),
      this.opts.leaseMs,
    ).then(
      (renewed) => {
        this.renewing = false;
        for (const r of leased) {
          // Finished while the renewal was under way: its outcome write settles it, not this.
          if (running.get(r.job.leaseToken) !== r) continue;
          const exp = renewed.get(r.job.id);
          if (exp === undefined) this.lose(r, 'lease renewal updated no row');
          else r.expiresAt = exp;
        }
      },
      (err: unknown) => {
        // A blip is not a lost lease: the lease stands until its database-issued expiry.
        this.renewing = false;
        this.judgeExpiries('lease expired while the database was unreachable');
        log.warn({ event: 'job.heartbeat_error', err: coerceError(err).message }, 'lease renewal failed; retrying');
        if (this.timer) clearTimeout(this.timer);
        this.schedule(Math.min(interval, 1_000));
      },
    );
    this.schedule(interval);
  }
}
