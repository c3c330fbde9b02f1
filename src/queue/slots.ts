import type { EndpointGate } from './endpoint-gate.js';
import type { ClaimedJob } from './types.js';

/** The most jobs one claim takes, so a big backlog does not open thousands of sockets at once. */
export const CLAIM_MAX = 200;

export interface SlotLimits {
  /** Jobs with no endpoint (application handlers) in flight: `jobs.workers`. */
  workers: number;
  /**
   * Jobs with an endpoint (webhook deliveries) in flight: `notify.webhook.max_in_flight_total`.
   * Absent: deliveries share `workers` (one budget for every job, as a bare WorkerPool has).
   */
  deliveries?: number | undefined;
  /** The endpoint gate's caps (EndpointGate.endpointLimits), read at every claim. */
  caps?: EndpointGate['endpointLimits'] | undefined;
  /**
   * The endpoint gate's degraded endpoints: together they get at most half of the delivery budget,
   * so failing receivers cannot crowd out healthy ones however many of them there are.
   */
  degraded?: EndpointGate['degraded'] | undefined;
  /**
   * The endpoint gate's held endpoints: offered no slot and refused for claim on dispatch (the claim
   * itself checks the shared state too).
   */
  held?: EndpointGate['held'] | undefined;
  /** The endpoint gate's rate limits: a rate-limited endpoint is claimed only, never on dispatch. */
  rates?: EndpointGate['rates'] | undefined;
}

/** What one claim may take: application jobs, deliveries overall and per endpoint, and in all. */
export interface ClaimPlan {
  workers: number;
  deliveries: number;
  /** Both kinds together (with one shared budget, less than workers + deliveries). */
  total: number;
  /** Free slots per endpoint; undefined without caps (any endpoint, up to `deliveries`). */
  endpoints: Map<string, number> | undefined;
  /** Rate limits (deliveries per second, shared by every process) of the endpoints offered that have one. */
  rates?: ReadonlyMap<string, number> | undefined;
}

/**
 * A worker pool's slot accounting: slots taken (by running jobs, or reserved for a job being inserted as
 * running by claim on dispatch), by budget and per endpoint, and the slots an in-flight claim may
 * fill, which a reservation must keep off.
 */
export class SlotBudget {
  private apps = 0;
  private deliveries = 0;
  private readonly perEndpoint = new Map<string, number>();
  /** Deliveries claimed ahead: leased here, waiting for a slot of their endpoint (the local queue). */
  private aheadTotal = 0;
  private readonly aheadPerEndpoint = new Map<string, number>();
  private claim: ClaimPlan | null = null;

  constructor(private readonly limits: SlotLimits) {}

  private get shared(): boolean {
    return this.limits.deliveries === undefined;
  }

  private get deliveryCap(): number {
    return this.limits.deliveries ?? this.limits.workers;
  }

  get claiming(): boolean {
    return this.claim !== null;
  }

  /** Slots taken now, either budget. */
  get taken(): number {
    return this.apps + this.deliveries;
  }

  used(endpoint: string): number {
    return this.perEndpoint.get(endpoint) ?? 0;
  }

  /** The cap of an endpoint configured here, if any. */
  cap(endpoint: string): number | undefined {
    return this.limits.caps?.().get(endpoint);
  }

  private freeWorkers(): number {
    return this.shared ? this.limits.workers - this.apps - this.deliveries : this.limits.workers - this.apps;
  }

  private freeDeliveries(): number {
    return this.shared ? this.freeWorkers() : this.deliveryCap - this.deliveries;
  }

  /** What degraded endpoints may take together: half the delivery budget (at least 1). */
  private degradedHalf(): number {
    return Math.max(1, Math.floor(this.deliveryCap / 2));
  }

  /** Slots taken now by the endpoints degraded now. */
  private degradedUsed(): number {
    const degraded = this.limits.degraded;
    if (!degraded) return 0;
    let n = 0;
    for (const [ep, used] of this.perEndpoint) if (degraded(ep)) n += used;
    return n;
  }

  /** Deliveries of one endpoint claimed ahead, waiting here for a slot. */
  waiting(endpoint: string): number {
    return this.aheadPerEndpoint.get(endpoint) ?? 0;
  }

  /**
   * Room to claim ahead: a claim takes deliveries beyond the free slots, up to one cap's worth per
   * endpoint and one delivery budget's worth in all, held here leased until a slot frees. Claims
   * then carry more rows (PostgreSQL's cost is per statement as much as per row), and a freed slot
   * starts the next delivery at once, without a claim in between (bench/README.md#tuning-notes).
   */
  private aheadRoom(): number {
    return Math.max(0, this.deliveryCap - this.aheadTotal);
  }

  /** Is there room for a claim at all? */
  hasRoom(): boolean {
    return this.freeWorkers() > 0 || this.freeDeliveries() > 0 || (this.limits.caps !== undefined && this.aheadRoom() > 0);
  }

  /** May a delivery of this endpoint start now (a slot of its own and of the delivery budget)? */
  canStart(endpoint: string): boolean {
    if (this.freeDeliveries() <= 0) return false;
    if (this.limits.held?.(endpoint)) return false;
    const cap = this.cap(endpoint);
    if (cap !== undefined && this.used(endpoint) >= cap) return false;
    return !(this.limits.degraded?.(endpoint) && this.degradedUsed() >= this.degradedHalf());
  }

  /** A claimed delivery waits here for a slot (claimed ahead). */
  queue(endpoint: string): void {
    this.aheadTotal++;
    this.aheadPerEndpoint.set(endpoint, this.waiting(endpoint) + 1);
  }

  /** A delivery that waited here leaves the local queue (started, handed back or lost). */
  dequeue(endpoint: string): void {
    this.aheadTotal--;
    const n = this.waiting(endpoint) - 1;
    if (n <= 0) this.aheadPerEndpoint.delete(endpoint);
    else this.aheadPerEndpoint.set(endpoint, n);
  }

  /**
   * Start a claim: what it may take, recorded in the same tick, so a reservation can never fill a
   * slot this claim may fill too. `unknown` endpoints (pending here but not configured) are offered
   * uncapped, within the delivery budget.
   */
  beginClaim(unknown: readonly string[]): ClaimPlan {
    const caps = this.limits.caps?.();
    const workers = Math.max(0, Math.min(CLAIM_MAX, this.freeWorkers()));
    // With per-endpoint caps, deliveries are also claimed ahead (aheadRoom); with one shared budget
    // (a bare WorkerPool), only into free slots.
    const ahead = caps && !this.shared ? this.aheadRoom() : 0;
    const deliveries = Math.max(0, Math.min(CLAIM_MAX, Math.max(0, this.freeDeliveries()) + ahead));
    // Without caps one statement takes both kinds, so only the smaller budget bounds it safely.
    const total = this.shared ? workers : caps ? Math.min(CLAIM_MAX, workers + deliveries) : Math.min(workers, deliveries);
    let endpoints: Map<string, number> | undefined;
    if (caps) {
      endpoints = new Map();
      const degraded: string[] = [];
      const held = this.limits.held;
      for (const [ep, max] of caps) {
        if (held?.(ep)) continue;
        const free = Math.max(0, max - this.used(ep));
        if (free > 0 && this.limits.degraded?.(ep)) degraded.push(ep);
        // A healthy endpoint is offered its free slots and a cap's worth ahead, less what waits already.
        else endpoints.set(ep, Math.min(free + (ahead > 0 ? Math.max(0, max - this.waiting(ep)) : 0), deliveries));
      }
      // The degraded half is shared out evenly, so no degraded endpoint (idle ones included) can
      // take all of it and starve another that has a backlog.
      let room = this.degradedHalf() - this.degradedUsed();
      const share = Math.max(1, Math.floor(room / Math.max(1, degraded.length)));
      for (const ep of degraded) {
        const n = Math.max(0, Math.min((caps.get(ep) ?? 0) - this.used(ep), share, room));
        room -= n;
        endpoints.set(ep, Math.min(n, deliveries));
      }
      for (const ep of unknown) if (!caps.has(ep)) endpoints.set(ep, deliveries);
    }
    const rates = this.limits.rates?.();
    this.claim = { workers, deliveries, total, endpoints, ...(rates && rates.size > 0 ? { rates } : {}) };
    return this.claim;
  }

  endClaim(): void {
    this.claim = null;
  }

  /** One slot for a job about to be inserted as running, if its budget and its endpoint allow. */
  reserve(endpoint: string | null): boolean {
    const c = this.claim;
    // Keep off what the claim under way may still fill.
    const pending = (kind: number): number => (c ? (this.shared ? c.total : kind) : 0);
    if (endpoint === null) {
      if (this.freeWorkers() - pending(c?.workers ?? 0) <= 0) return false;
      this.take(null);
      return true;
    }
    if (this.freeDeliveries() - pending(c?.deliveries ?? 0) <= 0) return false;
    if (this.limits.held?.(endpoint) || (this.limits.rates?.().get(endpoint) ?? 0) > 0) return false;
    // Deliveries claimed ahead go first: a fresh one does not overtake them.
    if (this.waiting(endpoint) > 0) return false;
    const cap = this.cap(endpoint);
    if (cap === undefined || this.used(endpoint) + Math.max(0, c?.endpoints?.get(endpoint) ?? 0) >= cap) return false;
    if (this.limits.degraded?.(endpoint) && this.degradedUsed() >= this.degradedHalf()) return false;
    this.take(endpoint);
    return true;
  }

  /** A job takes a slot (a claimed one, or a reservation). */
  take(endpoint: string | null): void {
    if (endpoint === null) {
      this.apps++;
      return;
    }
    this.deliveries++;
    this.perEndpoint.set(endpoint, this.used(endpoint) + 1);
  }

  /** A job gives its slot back (finished, handed back, or a reservation not written). */
  drop(endpoint: string | null): void {
    if (endpoint === null) {
      this.apps--;
      return;
    }
    this.deliveries--;
    const n = this.used(endpoint) - 1;
    if (n <= 0) this.perEndpoint.delete(endpoint);
    else this.perEndpoint.set(endpoint, n);
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
