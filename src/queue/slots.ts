import type { ClaimedJob } from './types.js';

/**
 * A worker pool's slot accounting: how many jobs it holds, overall and per endpoint (what
 * `max_in_flight` caps), the slots reserved for jobs being inserted as running (claim on
 * dispatch), and the slots an in-flight claim may fill, which a reservation must keep off.
 */
export class SlotLedger {
  /** Jobs running or reserved, per endpoint. */
  private readonly perEndpoint = new Map<string, number>();
  /** Slots taken by reserve() and not yet adopted or given back. */
  private reservedCount = 0;
  /** While a claim is in flight: the slots it may fill, overall and per endpoint. */
  private claimingFree = 0;
  private claimingSlots: ReadonlyMap<string, number> | undefined;

  constructor(
    private readonly concurrency: number,
    private readonly limits: (() => ReadonlyMap<string, number>) | undefined,
  ) {}

  get reserved(): number {
    return this.reservedCount;
  }

  get claiming(): boolean {
    return this.claimingFree > 0;
  }

  /** Slots a new claim may fill, given how many jobs are running. */
  free(running: number): number {
    return this.concurrency - running - this.reservedCount;
  }

  used(endpoint: string): number {
    return this.perEndpoint.get(endpoint) ?? 0;
  }

  /** The cap of an endpoint configured here, if any. */
  cap(endpoint: string): number | undefined {
    return this.limits?.().get(endpoint);
  }

  /** One slot for a job about to be inserted as running, if overall and endpoint room allow. */
  reserve(endpoint: string | null, running: number): boolean {
    if (running + this.reservedCount + this.claimingFree >= this.concurrency) return false;
    if (endpoint !== null) {
      const cap = this.cap(endpoint);
      const used = this.used(endpoint);
      if (cap === undefined || used + Math.max(0, this.claimingSlots?.get(endpoint) ?? 0) >= cap) return false;
      this.perEndpoint.set(endpoint, used + 1);
    }
    this.reservedCount++;
    return true;
  }

  /** A reserved slot whose job was not written after all. */
  unreserve(endpoint: string | null): void {
    this.reservedCount--;
    if (endpoint !== null) this.drop(endpoint);
  }

  /** A reserved slot whose job now runs (its endpoint stays counted). */
  adopted(): void {
    this.reservedCount--;
  }

  /** A claimed job starts (adopted ones were counted at reserve()). */
  take(endpoint: string): void {
    this.perEndpoint.set(endpoint, this.used(endpoint) + 1);
  }

  drop(endpoint: string): void {
    const n = this.used(endpoint) - 1;
    if (n <= 0) this.perEndpoint.delete(endpoint);
    else this.perEndpoint.set(endpoint, n);
  }

  beginClaim(free: number): void {
    this.claimingFree = free;
  }

  /**
   * Free slots per endpoint for the claim under way: the configured caps, plus uncapped `unknown`
   * endpoints (pending here but not configured). Recorded in the same tick as the snapshot, so a
   * reservation can never fill a slot this claim may fill too. Undefined without caps.
   */
  claimSlots(unknown: readonly string[]): Map<string, number> | undefined {
    const limits = this.limits?.();
    if (!limits) return undefined;
    const out = new Map<string, number>();
    for (const [ep, max] of limits) out.set(ep, max - this.used(ep));
    for (const ep of unknown) out.set(ep, this.concurrency);
    this.claimingSlots = out;
    return out;
  }

  endClaim(): void {
    this.claimingFree = 0;
    this.claimingSlots = undefined;
  }
}

/** Did some endpoint get every slot it was offered (or have none), so more of its work may wait? */
export function slotsUsedUp(slots: ReadonlyMap<string, number> | undefined, jobs: readonly ClaimedJob[]): boolean {
  if (!slots) return false;
  const got = new Map<string, number>();
  for (const j of jobs) if (j.endpoint !== null) got.set(j.endpoint, (got.get(j.endpoint) ?? 0) + 1);
  for (const [ep, n] of slots) if ((got.get(ep) ?? 0) >= n) return true;
  return false;
}
