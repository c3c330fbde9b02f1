import type { Endpoint } from '../config/index.js';
import type { Logger } from '../log.js';
import type { JobOutcome } from '../queue/types.js';
import { congestionSignal } from './signals.js';

/** A lowered limit with no failure for this many timeout windows (and at least QUIET_MIN_MS) is restored. */
const QUIET_WINDOWS = 3;
const QUIET_MIN_MS = 30_000;

interface State {
  limit: number;
  /** When the limit was last lowered (performance.now()); -Infinity: never. */
  cutAt: number;
}

/**
 * An adaptive concurrency limit per endpoint in this process (AIMD): each endpoint starts at its
 * `max_in_flight`; a timeout, refused connection, 5xx or 429 halves it, at most once per timeout
 * window (the attempts in flight when it failed time out together and count once); each success
 * raises it by one, back up to `max_in_flight`. It never drops below 1. The worker pool reads the
 * limits at every claim (and claim on dispatch), so a failing receiver holds few slots and its
 * backlog waits in the queue instead of in sockets.
 */
export class AdaptiveLimits {
  private readonly state = new Map<string, State>();
  private capsCache: Map<string, number> | null = null;
  private cachedFrom: ReadonlyMap<string, Endpoint> | null = null;

  constructor(
    private readonly opts: {
      endpoints: () => ReadonlyMap<string, Endpoint>;
      log?: Logger | undefined;
      now?: () => number;
    },
  ) {}

  private now(): number {
    return this.opts.now ? this.opts.now() : performance.now();
  }

  /**
   * A lowered limit also comes back by time: after QUIET_WINDOWS timeout windows with no failure
   * (at least 30 s), since an endpoint that gets no traffic has no successes to climb back with.
   */
  private recoverQuiet(eps: ReadonlyMap<string, Endpoint>): void {
    if (this.state.size === 0) return;
    const now = this.now();
    for (const [name, s] of this.state) {
      const ep = eps.get(name);
      if (ep && now - s.cutAt < Math.max(QUIET_MIN_MS, QUIET_WINDOWS * ep.timeout)) continue;
      this.state.delete(name);
      this.capsCache = null;
      if (ep)
        this.opts.log?.info(
          { event: 'endpoint.limit_restored', endpoint: name, limit: ep.max_in_flight },
          `endpoint ${name} has not failed for a while: back to its max_in_flight`,
        );
    }
  }

  /** Each configured endpoint's limit now: its max_in_flight, or less while it fails. */
  caps(): ReadonlyMap<string, number> {
    const eps = this.opts.endpoints();
    this.recoverQuiet(eps);
    if (this.capsCache && this.cachedFrom === eps) return this.capsCache;
    const out = new Map<string, number>();
    for (const [name, ep] of eps) {
      const s = this.state.get(name);
      out.set(name, s ? Math.min(s.limit, ep.max_in_flight) : ep.max_in_flight);
    }
    this.capsCache = out;
    this.cachedFrom = eps;
    return out;
  }

  /** True while an endpoint's limit is below its max_in_flight. */
  isDegraded(name: string): boolean {
    if (this.state.size === 0) return false;
    this.recoverQuiet(this.opts.endpoints());
    const s = this.state.get(name);
    if (!s) return false;
    const ep = this.opts.endpoints().get(name);
    return ep !== undefined && s.limit < ep.max_in_flight;
  }

  limit(name: string): number | undefined {
    return this.caps().get(name);
  }

  /** Feed one finished attempt of `endpoint`. */
  observe(endpoint: string, outcome: JobOutcome): void {
    const signal = congestionSignal(outcome);
    if (signal === null) return;
    const ep = this.opts.endpoints().get(endpoint);
    if (!ep) return;
    const s = this.state.get(endpoint);
    if (signal === 'success') {
      if (!s) return;
      s.limit += 1;
      if (s.limit >= ep.max_in_flight) {
        this.state.delete(endpoint);
        this.opts.log?.info(
          { event: 'endpoint.limit_restored', endpoint, limit: ep.max_in_flight },
          `endpoint ${endpoint} answers again: back to its max_in_flight`,
        );
      }
      this.capsCache = null;
      return;
    }
    const now = this.now();
    const cur = s ?? { limit: ep.max_in_flight, cutAt: -Infinity };
    if (now - cur.cutAt < ep.timeout) return;
    const next = Math.max(1, Math.floor(cur.limit / 2));
    if (next === cur.limit) {
      // At 1 already (or max_in_flight 1): nothing to lower, but the failure keeps it from recovering by time.
      if (s) s.cutAt = now;
      return;
    }
    cur.cutAt = now;
    cur.limit = next;
    this.state.set(endpoint, cur);
    this.capsCache = null;
    this.opts.log?.warn(
      { event: 'endpoint.limit_lowered', endpoint, limit: next, max_in_flight: ep.max_in_flight },
      `endpoint ${endpoint} is failing: at most ${next} deliveries in flight per process until it answers again`,
    );
  }
}
