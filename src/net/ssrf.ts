/**
 * The SSRF guard (docs/operations.md#ssrf-guard): endpoints that anyone with an API token can point
 * anywhere must not reach the service's own network. Two checks:
 * - `checkUrl` when an endpoint is written: http(s), no user-info, a bounded length, and a host that
 *   is an IP literal (as the WHATWG parser normalised it: `http://2130706433/` is 127.0.0.1) or
 *   `localhost` is refused when it is not global unicast.
 * - `connector` on every new connection: the host is resolved once, every address checked, and the
 *   socket connects to exactly those addresses (net.connect's `lookup`), so a DNS answer that
 *   changes between the check and the connect (rebinding) cannot switch it.
 * `notify.webhook.allow_networks` opens ranges on purpose (internal receivers, tests on 127.0.0.1).
 */
import { lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { buildConnector } from 'undici';
import { badField, type ApiError } from '../errors.js';
import { blockedRange, parseCidr, withoutZone, type BlockedRange } from './ranges.js';

export { blockedRange, parseCidr, type BlockedRange, type Cidr } from './ranges.js';

/** The error code of a refused address; classify.ts makes it a permanent `blocked_address` failure. */
export const BLOCKED_ADDRESS = 'ACW_BLOCKED_ADDRESS';

/** The config key listing the networks the guard lets through (named in every refusal). */
export const ALLOW_KEY = 'notify.webhook.allow_networks';

/** The longest endpoint URL accepted through the API (browsers and proxies commonly stop near 2 KiB). */
export const MAX_URL_LENGTH = 2048;

/** How long checkUrlResolved waits for DNS when an endpoint is written. */
const CHECK_LOOKUP_MS = 2_000;

/** A connection refused by the guard. The message names the host, the address and the range, never a path or query. */
export class BlockedAddressError extends Error {
  override readonly name = 'BlockedAddressError';
  readonly code = BLOCKED_ADDRESS;
  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: BlockedRange,
  ) {
    const what = host === address ? address : `${host} resolves to ${address}, which`;
    super(`${what} is in ${range.name} ${range.cidr}: not a global unicast address (${allowHint(address, range)})`);
  }
}

/** The config key that would let `address` through, with the entry to add (the address alone for the catch-all ::/0). */
export function allowHint(address: string, range: BlockedRange): string {
  const prefix = Number(range.cidr.split('/')[1]);
  const ip = withoutZone(address);
  const entry = Number.isInteger(prefix) && prefix > 0 ? range.cidr : `${ip}/${isIP(ip) === 6 ? 128 : 32}`;
  return `to allow it, add "${entry}" to ${ALLOW_KEY}`;
}

/** Resolves a host name to every address (tests inject one; default: the system resolver, as net.connect uses). */
export type HostLookup = (hostname: string, family: 0 | 4 | 6) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export interface SsrfGuardOptions {
  /** CIDRs the guard lets through (`notify.webhook.allow_networks`); validated by the config schema. */
  allowNetworks?: readonly string[];
  lookup?: HostLookup | undefined;
}

const systemLookup: HostLookup = (hostname, family) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, family }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export class SsrfGuard {
  private readonly allow = new BlockList();
  private readonly resolveHost: HostLookup;

  constructor(opts: SsrfGuardOptions = {}) {
    for (const text of opts.allowNetworks ?? []) {
      const cidr = parseCidr(text);
      if (typeof cidr === 'string') throw new Error(`notify.webhook.allow_networks: ${cidr}`);
      this.allow.addSubnet(cidr.network, cidr.prefix, cidr.family);
    }
    this.resolveHost = opts.lookup ?? systemLookup;
  }

  /** The range that refuses `address` (an IP literal), or null when it is global unicast or allowed. */
  refusal(address: string): BlockedRange | null {
    const range = blockedRange(address);
    if (range === null) return null;
    const ip = withoutZone(address);
    const family = isIP(ip);
    if (family === 0) return range;
    // BlockList matches an IPv4 rule against the IPv4-mapped form too.
    return this.allow.check(ip, family === 4 ? 'ipv4' : 'ipv6') ? null : range;
  }

  /**
   * An endpoint URL as given to the API: the parsed URL, or an ApiError 400 naming `field`. A host
   * name (other than localhost) is not resolved here; every connection checks what it resolves to.
   */
  checkUrl(raw: unknown, field = 'url'): URL {
    if (typeof raw !== 'string') return fail(field, `expected an http:// or https:// URL, got ${typeof raw}`);
    if (raw.length > MAX_URL_LENGTH) return fail(field, `must be at most ${MAX_URL_LENGTH} characters, got ${raw.length}`);
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return fail(field, 'expected an http:// or https:// URL, got text that does not parse as a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return fail(field, `expected an http:// or https:// URL, got a "${url.protocol}" URL`);
    }
    if (url.username !== '' || url.password !== '') {
      return fail(field, 'must not carry user-info ("user:password@"): put credentials in the endpoint headers');
    }
    const refused = this.hostRefusal(url);
    if (refused !== null) throw blocked(field, refused);
    return url;
  }

  /** The refusal of a parsed URL's host when it is an IP literal or localhost; a name is checked at connect. */
  hostRefusal(url: URL): BlockedAddressError | null {
    const host = hostOf(url);
    if (isIP(host) !== 0) {
      const range = this.refusal(host);
      return range === null ? null : new BlockedAddressError(host, host, range);
    }
    if (!isLocalhost(host)) return null;
    // RFC 6761: resolvers answer loopback for these without asking DNS.
    const range = this.refusal('127.0.0.1');
    return range === null ? null : new BlockedAddressError(host, '127.0.0.1', range);
  }

  /**
   * `checkUrl`, then the host name resolved now and every address checked, for an early answer to
   * the writer. A name that does not resolve is accepted (it may by the time of the first delivery).
   */
  async checkUrlResolved(raw: unknown, field = 'url'): Promise<URL> {
    const url = this.checkUrl(raw, field);
    const host = hostOf(url);
    if (isIP(host) !== 0) return url;
    let addresses: ReadonlyArray<{ address: string }>;
    // Bounded: a slow DNS zone must not hold the request (or libuv's resolver threads, which
    // deliveries share); a name that does not answer in time is treated as not resolving yet,
    // and every connection checks it anyway.
    let timer: NodeJS.Timeout | undefined;
    try {
      addresses = await Promise.race([
        this.resolveHost(host, 0),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('lookup timed out')), CHECK_LOOKUP_MS);
        }),
      ]);
    } catch {
      return url;
    } finally {
      clearTimeout(timer);
    }
    const err = this.firstRefused(host, addresses);
    if (err !== null) throw blocked(field, err);
    return url;
  }

  /** For net.connect: resolve, refuse the host if any address is refused, else hand over exactly the checked addresses. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    const answer = (err: NodeJS.ErrnoException | null, addresses: ReadonlyArray<{ address: string; family: number }>): void => {
      if (err !== null) callback(err, '');
      else if (options.all)
        callback(
          null,
          addresses.map((a) => ({ address: a.address, family: a.family })),
        );
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    };
    // Answered outside the promise chain: an exception in net's callback must not become a rejection.
    this.resolveChecked(hostname, family).then(
      (addresses) => setImmediate(answer, null, addresses),
      (err: NodeJS.ErrnoException) => setImmediate(answer, err, []),
    );
  };

  private async resolveChecked(hostname: string, family: 0 | 4 | 6): Promise<ReadonlyArray<{ address: string; family: number }>> {
    const addresses = await this.resolveHost(hostname, family);
    if (addresses.length === 0) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const err = this.firstRefused(hostname, addresses);
    if (err !== null) throw err;
    return addresses;
  }

  /**
   * Wraps an undici connector built with `lookup: guard.lookup`: an IP-literal host (net.connect
   * never calls lookup for one) is checked here. The pool's origin comes from the WHATWG parser,
   * so the host is already normalised (`0x7f000001` is 127.0.0.1; brackets are stripped by undici).
   */
  connector(connect: buildConnector.connector): buildConnector.connector {
    return (opts, callback) => {
      const host = opts.hostname;
      if (isIP(withoutZone(host)) !== 0) {
        const range = this.refusal(host);
        if (range !== null) {
          callback(new BlockedAddressError(host, host, range), null);
          return;
        }
      }
      connect(opts, callback);
    };
  }

  private firstRefused(host: string, addresses: ReadonlyArray<{ address: string }>): BlockedAddressError | null {
    for (const { address } of addresses) {
      const range = this.refusal(address);
      if (range !== null) return new BlockedAddressError(host, address, range);
    }
    return null;
  }
}

/** The URL's host without IPv6 brackets or a trailing dot. */
function hostOf(url: URL): string {
  const h = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

function isLocalhost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost');
}

function fail(field: string, message: string): never {
  throw badField(field, message);
}

function blocked(field: string, err: BlockedAddressError): ApiError {
  return badField(field, err.message, { reason: 'blocked_address', range: err.range.name, cidr: err.range.cidr });
}
