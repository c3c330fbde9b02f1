import { Pool } from 'undici';
import type { Endpoint } from '../config/index.js';
import { SsrfGuard, type HostLookup } from '../net/ssrf.js';
import { deliveryPoolOptions } from './send.js';

export interface EndpointAgentsOptions {
  /** An endpoint's pool with no request for this long (and none in flight) is closed and dropped. Default 5 min. */
  idleMs?: number;
  /** Resolves host names for the SSRF guard (tests inject one); default: the system resolver. */
  lookup?: HostLookup | undefined;
}

interface Entry {
  pool: Pool;
  /** What the pool was made for: a change to any of these replaces it (the URL only if its origin changed). */
  url: string;
  origin: string;
  connections: number;
  connectTimeout: number;
  /** The endpoint's `allow_networks` when its guard is on, null when off (docs/operations.md#ssrf-guard). */
  guard: readonly string[] | null;
  /** Set by every lookup, cleared by the idle sweep: a pool the sweep finds unused twice in a row is idle. */
  used: boolean;
}

/**
 * One undici Pool per endpoint name (docs/operations.md#connections): an endpoint that hangs holds
 * only its own sockets, even when other endpoints share its origin. Each pool has `max_in_flight`
 * connections, the most the worker runs at once for that endpoint in this process, so a delivery
 * never waits for a local socket. Pools are made on first use, replaced when the endpoint's origin
 * or limits change, and closed once idle, so an endpoint that is gone leaves nothing behind.
 */
export class EndpointAgents {
  private readonly pools = new Map<string, Entry>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: EndpointAgentsOptions = {}) {
    this.sweeper = setInterval(() => this.sweep(), opts.idleMs ?? 5 * 60_000);
    this.sweeper.unref();
  }

  /** The endpoint's pool: a Map lookup and four compares on the hot path. */
  agentFor(ep: Endpoint): Pool {
    const e = this.pools.get(ep.name);
    if (
      e !== undefined &&
      e.url === ep.url &&
      e.connections === ep.max_in_flight &&
      e.connectTimeout === ep.connect_timeout &&
      e.guard === guardOf(ep)
    ) {
      e.used = true;
      return e.pool;
    }
    return this.replace(ep, e);
  }

  private replace(ep: Endpoint, old: Entry | undefined): Pool {
    // An unparsable URL never reaches the pool (sendWebhook refuses it first): any origin will do for it.
    const origin = originOf(ep.url) ?? 'http://invalid.invalid';
    const guard = guardOf(ep);
    if (
      old !== undefined &&
      old.origin === origin &&
      old.connections === ep.max_in_flight &&
      old.connectTimeout === ep.connect_timeout &&
      old.guard === guard
    ) {
      // Another path on the same origin: the pool serves it as it is.
      old.url = ep.url;
      old.used = true;
      return old.pool;
    }
    if (old !== undefined) retire(old.pool);
    if (this.closed) throw new Error('EndpointAgents is closed');
    const ssrf = guard === null ? undefined : new SsrfGuard({ allowNetworks: guard, lookup: this.opts.lookup });
    const pool = new Pool(origin, deliveryPoolOptions(ep.max_in_flight, ep.connect_timeout, ssrf));
    const entry = { pool, url: ep.url, origin, connections: ep.max_in_flight, connectTimeout: ep.connect_timeout, guard, used: true };
    this.pools.set(ep.name, entry);
    return pool;
  }

  /** Closes and drops each pool unused since the last sweep with nothing running or queued. */
  private sweep(): void {
    for (const [name, e] of this.pools) {
      if (e.used) {
        e.used = false;
        continue;
      }
      if (e.pool.stats.size > 0) continue; // queued or running: not idle, whatever the flag says
      this.pools.delete(name);
      retire(e.pool);
    }
  }

  /** How many endpoint pools are open (tests, metrics). */
  get size(): number {
    return this.pools.size;
  }

  /** Closes every pool, letting requests still running finish (the service stops its workers first). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const pools = [...this.pools.values()].map((e) => e.pool);
    this.pools.clear();
    await Promise.all(pools.map((p) => p.close()));
  }
}

/** What the guard of an endpoint's pool depends on; compared by identity (one frozen array per config). */
function guardOf(ep: Endpoint): readonly string[] | null {
  return ep.ssrf_guard ? ep.allow_networks : null;
}

function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/** A replaced or idle pool: requests still on it finish, then its sockets close. */
function retire(pool: Pool): void {
  pool.close().catch(() => {});
}
