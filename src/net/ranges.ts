/**
 * Which IP addresses are not global unicast, by name (docs/operations.md#ssrf-guard). The SSRF guard
 * refuses every address listed here unless `notify.webhook.allow_networks` opens it.
 */
import { BlockList, isIP } from 'node:net';

interface Range {
  readonly name: string;
  readonly cidr: string;
  readonly list: BlockList;
}

function range(name: string, cidr: string): Range {
  const [net, bits] = cidr.split('/') as [string, string];
  const family = isIP(net) === 6 ? 'ipv6' : 'ipv4';
  const list = new BlockList();
  list.addSubnet(net, Number(bits), family);
  return { name, cidr, list };
}

// Most specific first: the first match names the range.
const V4: readonly Range[] = [
  range('"this network"', '0.0.0.0/8'),
  range('private (RFC 1918)', '10.0.0.0/8'),
  range('shared address space (CGNAT)', '100.64.0.0/10'),
  range('loopback', '127.0.0.0/8'),
  range('link-local (cloud metadata)', '169.254.169.254/32'),
  range('link-local', '169.254.0.0/16'),
  range('private (RFC 1918)', '172.16.0.0/12'),
  range('IETF protocol assignments', '192.0.0.0/24'),
  range('documentation (TEST-NET-1)', '192.0.2.0/24'),
  range('6to4 relay anycast', '192.88.99.0/24'),
  range('private (RFC 1918)', '192.168.0.0/16'),
  range('benchmarking', '198.18.0.0/15'),
  range('documentation (TEST-NET-2)', '198.51.100.0/24'),
  range('documentation (TEST-NET-3)', '203.0.113.0/24'),
  range('multicast', '224.0.0.0/4'),
  range('broadcast', '255.255.255.255/32'),
  range('reserved', '240.0.0.0/4'),
];

// IPv4-mapped addresses (::ffff:0:0/96) are checked as the IPv4 address they carry, before these.
const V6: readonly Range[] = [
  range('unspecified', '::/128'),
  range('loopback', '::1/128'),
  range('IPv4-compatible (deprecated)', '::/96'),
  range('NAT64', '64:ff9b::/96'),
  range('NAT64 (local use)', '64:ff9b:1::/48'),
  range('discard-only', '100::/64'),
  range('Teredo', '2001::/32'),
  range('documentation', '2001:db8::/32'),
  range('IETF protocol assignments', '2001::/23'),
  range('6to4', '2002::/16'),
  range('documentation', '3fff::/20'),
  range('unique local (ULA)', 'fc00::/7'),
  range('link-local', 'fe80::/10'),
  range('multicast', 'ff00::/8'),
  // Global unicast is 2000::/3 (RFC 4291); everything else is reserved or one of the above.
  range('reserved (outside global unicast 2000::/3)', '::/0'),
];

const GLOBAL_UNICAST_V6 = range('global unicast', '2000::/3');
const MAPPED = range('IPv4-mapped', '::ffff:0:0/96');

/** Why an address is refused: the range's name and CIDR, and the IPv4 address a mapped IPv6 one carries. */
export interface BlockedRange {
  /** e.g. `loopback`, `private (RFC 1918)`, `IPv4-mapped loopback`. */
  readonly name: string;
  /** e.g. `127.0.0.0/8`. */
  readonly cidr: string;
}

/**
 * The named range `address` lies in when it is not global unicast, or null when it is. `address` is
 * an IPv4 or IPv6 literal without brackets (a zone like `%eth0` is ignored); anything else is
 * refused as `not an IP address`, so a caller can never let an unchecked string through.
 */
export function blockedRange(address: string): BlockedRange | null {
  const ip = withoutZone(address);
  const family = isIP(ip);
  if (family === 4) return match(V4, ip, 'ipv4');
  if (family !== 6) return { name: 'not an IP address', cidr: '-' };
  if (MAPPED.list.check(ip, 'ipv6')) {
    const v4 = mappedV4(ip);
    const r = match(V4, v4, 'ipv4');
    if (r === null) return null;
    const [net, bits] = r.cidr.split('/') as [string, string];
    return { name: `IPv4-mapped ${r.name}`, cidr: `::ffff:${net}/${96 + Number(bits)}` };
  }
  const r = match(V6, ip, 'ipv6');
  // ::/0 matches everything: only global unicast escapes it.
  if (r !== null && r.cidr === '::/0' && GLOBAL_UNICAST_V6.list.check(ip, 'ipv6')) return null;
  return r;
}

function match(ranges: readonly Range[], ip: string, type: 'ipv4' | 'ipv6'): BlockedRange | null {
  for (const r of ranges) if (r.list.check(ip, type)) return { name: r.name, cidr: r.cidr };
  return null;
}

export function withoutZone(address: string): string {
  const i = address.indexOf('%');
  return i < 0 ? address : address.slice(0, i);
}

/** The IPv4 address in the last 32 bits of a valid IPv6 literal in ::ffff:0:0/96. */
function mappedV4(ip: string): string {
  return v6Bytes(ip).slice(12).join('.');
}

/** A parsed `notify.webhook.allow_networks` entry. */
export interface Cidr {
  readonly network: string;
  readonly prefix: number;
  readonly family: 'ipv4' | 'ipv6';
}

/**
 * `10.0.0.0/8`, `fd00::/8`, or a single address (`/32`, `/128` implied). Returns a message for what
 * is wrong instead: a host part set (`10.1.0.0/8`) is refused, as it is most likely a typo.
 */
export function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const net = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(net);
  if (family === 0) return `expected a network like "10.0.0.0/8" or "fd00::/8", got ${JSON.stringify(text)}`;
  const max = family === 4 ? 32 : 128;
  const bits = slash < 0 ? String(max) : text.slice(slash + 1);
  const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return `expected a prefix length from 0 to ${max}, got ${JSON.stringify(text)}`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (prefix < max && !isNetworkAddress(net, prefix, family === 4 ? 4 : 6)) {
    return `${JSON.stringify(text)} has host bits set past /${prefix}: write the network address`;
  }
  return { network: net, prefix, family: type };
}

/** True when every bit of `ip` after `prefix` is zero. */
function isNetworkAddress(ip: string, prefix: number, family: 4 | 6): boolean {
  const bytes = family === 4 ? ip.split('.').map(Number) : v6Bytes(ip);
  for (let bit = prefix; bit < bytes.length * 8; bit++) {
    if (((bytes[bit >> 3]! >> (7 - (bit & 7))) & 1) === 1) return false;
  }
  return true;
}

/** The 16 bytes of a valid IPv6 literal (an embedded dotted IPv4 tail included). */
function v6Bytes(ip: string): number[] {
  let text = ip;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  let tail: number[] = [];
  if (dotted) {
    tail = dotted.slice(1).map(Number);
    text = text.slice(0, dotted.index) + '0:0';
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const left = hexGroups(head);
  const right = hexGroups(rest);
  const groups = rest === undefined ? left : [...left, ...Array.from({ length: 8 - left.length - right.length }, () => 0), ...right];
  const bytes = groups.flatMap((g) => [g >> 8, g & 255]);
  if (dotted) bytes.splice(12, 4, ...tail);
  return bytes;
}

function hexGroups(text: string | undefined): number[] {
  return text ? text.split(':').map((g) => parseInt(g, 16)) : [];
}
