/**
 * The two timers that wake a worker pool's claim loop before its fallback poll (see WorkerPool):
 * the next pending job falling due, and the refill of an endpoint whose cap cut the last claim short.
 */
export class ClaimTimers {
  private dueTimer: NodeJS.Timeout | null = null;
  private dueAt = Infinity;
  private refillTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly opts: {
      /** Due times past the poll are left to the poll. */
      pollMs: number;
      /** Wake the claim loop with "new work may exist". */
      wake: () => void;
    },
  ) {}

  /** Wake when the next job falls due; an earlier deadline replaces a later one, never the reverse. */
  due(ms: number): void {
    if (this.stopped || ms > this.opts.pollMs) return;
    const at = Date.now() + Math.max(0, ms) + 5;
    if (this.dueTimer && at >= this.dueAt) return;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.dueAt = at;
    this.dueTimer = setTimeout(() => {
      this.dueTimer = null;
      this.dueAt = Infinity;
      this.opts.wake();
    }, at - Date.now());
  }

  /**
   * A slot came back to an endpoint that used up its slots in the last claim: run `refill` once a
   * quarter of its cap is free, or 2 ms after the first slot came back, so a capped endpoint is
   * refilled in batches rather than with one claim per finished job (half the cap measured no better).
   */
  refill(free: number, cap: number | undefined, refill: () => void): void {
    const fire = (): void => {
      if (this.refillTimer) clearTimeout(this.refillTimer);
      this.refillTimer = null;
      refill();
    };
    if (free >= Math.max(1, Math.floor((cap ?? 0) / 4))) fire();
    else this.refillTimer ??= setTimeout(fire, 2);
  }

  stop(): void {
    this.stopped = true;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    if (this.refillTimer) clearTimeout(this.refillTimer);
  }
}
