import { hashToken, type Principal } from '../users.js';

/**
 * Known tokens of this process, so an authenticated request reads no `users` row: positive entries
 * only, keyed by the token's SHA-256, least recently used first out past `maxEntries`, each trusted
 * for `ttlMs` after the lookup that found it. Unknown tokens are never kept (a token `users add`
 * just made works at once; random tokens cannot grow memory). A revoke evicts its user's entries
 * through NOTIFY in every process (Service wires it) and directly in the revoking process
 * (forgetUser); the TTL bounds what a missed NOTIFY can keep alive (docs/operations.md#authentication).
 */

export interface TokenCacheOptions {
  /** Default 10,000. */
  maxEntries?: number;
  /** How long a found token is trusted without asking the database again; default 1 s. */
  ttlMs?: number;
  /** A monotonic clock in ms (tests move it by hand). */
  now?: () => number;
}

interface Entry {
  principal: Principal;
  expiresAt: number;
}

/** Every open cache of this process, for forgetUser. */
const open = new Set<TokenCache>();

/** Evict a user's tokens from every cache of this process (a revoke made here, at its commit). */
export function forgetUser(name: string): void {
  for (const c of open) c.evictUser(name);
}

export class TokenCache {
  readonly maxEntries: number;
  readonly ttlMs: number;
  private readonly now: () => number;
  /** Insertion order is recency order: a hit moves its entry to the end. */
  private readonly entries = new Map<string, Entry>();
  /** Bumped by every eviction, so a lookup that was in flight meanwhile does not put back what it read before. */
  private epoch = 0;

  constructor(
    private readonly lookup: (tokenHash: string) => Promise<Principal | null>,
    opts: TokenCacheOptions = {},
  ) {
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 1_000;
    this.now = opts.now ?? (() => performance.now());
    if (!(this.maxEntries >= 1) || !(this.ttlMs >= 0)) throw new RangeError('TokenCache: maxEntries must be >= 1 and ttlMs >= 0');
    open.add(this);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The principal a bearer token belongs to, or null (unknown, empty, malformed or revoked). */
  async authenticate(token: string): Promise<Principal | null> {
    // Our tokens are ~48 characters; anything far longer is no token of ours and is not worth hashing.
    if (typeof token !== 'string' || token.length === 0 || token.length > 512) return null;
    const hash = hashToken(token);
    const started = this.now();
    const hit = this.entries.get(hash);
    if (hit) {
      this.entries.delete(hash);
      if (hit.expiresAt > started) {
        this.entries.set(hash, hit);
        return hit.principal;
      }
    }
    const epoch = this.epoch;
    const principal = await this.lookup(hash);
    if (principal && epoch === this.epoch) {
      // Trusted from the moment the lookup started: the row may have changed since.
      this.entries.set(hash, { principal, expiresAt: started + this.ttlMs });
      for (const oldest of this.entries.keys()) {
        if (this.entries.size <= this.maxEntries) break;
        this.entries.delete(oldest);
      }
    }
    return principal;
  }

  evictUser(name: string): void {
    this.epoch++;
    for (const [hash, e] of this.entries) if (e.principal.name === name) this.entries.delete(hash);
  }

  clear(): void {
    this.epoch++;
    this.entries.clear();
  }

  close(): void {
    this.clear();
    open.delete(this);
  }
}
