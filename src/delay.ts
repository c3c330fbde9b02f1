/**
 * "Double the delay up to a cap", written once: the retry schedule of a job, and the waits of
 * every loop that retries after an error (claims, outcome writes, the outbox pump, LISTEN).
 */

/** `base * 2^steps`, capped; `steps` below 0 counts as 0. */
export function doubling(base: number, steps: number, cap: number): number {
  return Math.min(base * 2 ** Math.max(steps, 0), cap);
}

/** A wait that doubles after each failure up to `cap` and starts over after a success. */
export class DoublingDelay {
  private ms: number;

  constructor(
    private readonly first: number,
    private readonly cap: number,
  ) {
    this.ms = first;
  }

  /** The wait to use now; the one after it is twice as long, up to the cap. */
  next(): number {
    const ms = this.ms;
    this.ms = doubling(ms, 1, this.cap);
    return ms;
  }

  reset(): void {
    this.ms = this.first;
  }
}

/**
 * A loop's wake-up: `wake()` ends the current `wait()` at once, or (when nobody waits) makes the
 * next `wait()` return at once, so a signal that lands while the loop is busy is not lost.
 */
export class Wakeup {
  private waiter: (() => void) | null = null;
  private pending: boolean;

  constructor(opts: { pending?: boolean } = {}) {
    this.pending = opts.pending ?? false;
  }

  wake(): void {
    this.pending = true;
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** Forget a wake-up not yet waited for: the caller is about to do what it asked for. */
  clear(): void {
    this.pending = false;
  }

  /** True when woken (or a wake-up was pending), false when `ms` passed first. */
  wait(ms: number): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.waiter = null;
        resolve(false);
      }, ms);
      this.waiter = () => {
        clearTimeout(t);
        this.pending = false;
        resolve(true);
      };
    });
  }
}
