/**
 * A database that refuses writes (read-only: a hot standby after a failover, or
 * default_transaction_read_only; or a full disk) fails every periodic runner and every claim until
 * it is fixed. That is said at once, then once a minute (docs/operations.md#logs), not once per try.
 */
const REFUSES_WRITES = new Set(['25006', '53100']);

/** True for an error of a database that refuses writes (SQLSTATE 25006 or 53100). */
export function refusesWrites(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && REFUSES_WRITES.has(code);
}

/** Per key: the first at once, then at most one a minute, with how many were skipped in between. */
export class EveryMinute {
  private readonly last = new Map<string, { at: number; skipped: number }>();

  constructor(private readonly everyMs = 60_000) {}

  /** The number of lines skipped since the last one logged for `key`, or undefined: skip this one too. */
  pass(key: string, now = Date.now()): number | undefined {
    const l = this.last.get(key);
    if (l && now - l.at < this.everyMs) {
      l.skipped++;
      return undefined;
    }
    this.last.set(key, { at: now, skipped: 0 });
    return l?.skipped ?? 0;
  }

  /** Writes work again: the next failure is said at once. */
  reset(key: string): void {
    this.last.delete(key);
  }
}
