// Edges of the SSRF guard (docs/operations.md#ssrf-guard) that mutation testing found unchecked:
// dotted IPv4-mapped forms and zones, CIDR prefixes that Number() would accept, the URL length
// bound, the resolver's family and empty answers, and the system resolver itself.
import { describe, expect, it } from 'vitest';
import { blockedRange, BlockedAddressError, MAX_URL_LENGTH, parseCidr, SsrfGuard, type HostLookup } from '../../src/net/ssrf.js';
import { ApiError } from '../../src/errors.js';

const lookupVia = (guard: SsrfGuard, host: string, options: { all: boolean; family?: number }) =>
  new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((resolve) =>
    guard.lookup(host, options, (err, address) => resolve({ err, address })),
  );

describe('blockedRange, beyond the range table', () => {
  it('names what is not an IP literal, with no CIDR', () => {
    expect(blockedRange('hooks.example.com')).toEqual({ name: 'not an IP address', cidr: '-' });
  });

  it.each([
    // Every octet of more than one digit: the dotted tail is read whole, not as hex groups.
    ['::ffff:192.168.10.20', 'IPv4-mapped private (RFC 1918)'],
    ['::ffff:10.20.30.40', 'IPv4-mapped private (RFC 1918)'],
    ['0:0:0:0:0:ffff:172.16.10.10', 'IPv4-mapped private (RFC 1918)'],
    ['::ffff:169.254.169.254', 'IPv4-mapped link-local (cloud metadata)'],
    // A zone (as a resolver may return) is ignored, also after a dotted tail.
    ['::ffff:127.0.0.1%eth0', 'IPv4-mapped loopback'],
    ['::ffff:10.20.30.40%2', 'IPv4-mapped private (RFC 1918)'],
  ])('reads %s as %s', (address, name) => {
    expect(blockedRange(address)?.name).toBe(name);
  });

  it('lets a dotted IPv4-mapped global address through', () => {
    expect(blockedRange('::ffff:93.184.216.34')).toBeNull();
    expect(blockedRange('::ffff:93.184.216.34%eth0')).toBeNull();
  });
});

describe('parseCidr, strictly', () => {
  it.each(['10.0.0.0/ 8', '10.0.0.0/8 ', '10.0.0.0/0x8', '10.0.0.0/1e1', '10.0.0.0/+8', '10.0.0.0/008x'])(
    'refuses the prefix of %s, which Number() would read as a number',
    (text) => {
      expect(parseCidr(text)).toMatch(/prefix length from 0 to 32/);
    },
  );

  it('places the groups after "::" at the end when checking host bits', () => {
    expect(parseCidr('fd00::1:0/112')).toEqual({ network: 'fd00::1:0', prefix: 112, family: 'ipv6' });
    // The 1 is bit 111, the last of the seventh group.
    expect(parseCidr('fd00::1:0/111')).toMatch(/host bits set past \/111/);
  });

  it('reads a dotted IPv4-mapped network', () => {
    expect(parseCidr('::ffff:10.0.0.0/104')).toEqual({ network: '::ffff:10.0.0.0', prefix: 104, family: 'ipv6' });
    expect(parseCidr('::ffff:10.0.0.1/104')).toMatch(/host bits set past \/104/);
  });
});

describe('SsrfGuard settings', () => {
  it('refuses a bad allow_networks entry, naming the key and the entry', () => {
    expect(() => new SsrfGuard({ allowNetworks: ['127.0.0.0/8', '10.1.0.0/8'] })).toThrow(
      'notify.webhook.allow_networks: "10.1.0.0/8" has host bits set past /8: write the network address',
    );
  });

  it('refuses what is not an IP literal even when every address is allowed', () => {
    const open = new SsrfGuard({ allowNetworks: ['0.0.0.0/0', '::/0'] });
    expect(open.refusal('hooks.example.com')).toEqual({ name: 'not an IP address', cidr: '-' });
    expect(open.refusal('10.0.0.1')).toBeNull();
  });
});

/** An https URL of exactly `length` characters. */
const urlOf = (length: number) => {
  const head = 'https://example.com/';
  return head + 'a'.repeat(length - head.length);
};

describe('checkUrl bounds', () => {
  const guard = new SsrfGuard();
  it(`accepts a URL of exactly ${MAX_URL_LENGTH} characters and refuses one more`, () => {
    expect(guard.checkUrl(urlOf(MAX_URL_LENGTH)).pathname.length).toBe(MAX_URL_LENGTH - 'https://example.com'.length);
    expect(() => guard.checkUrl(urlOf(MAX_URL_LENGTH + 1))).toThrow(`url: must be at most ${MAX_URL_LENGTH} characters, got 2049`);
  });

  it('refuses a password without a user name', () => {
    let err: unknown;
    try {
      guard.checkUrl('https://:hunter2@example.com/');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).message).toMatch(/^url: must not carry user-info/);
    expect((err as ApiError).message).not.toContain('hunter2');
  });

  it('checkUrlResolved does not send an IP literal to the resolver (a slow DNS cannot hold it)', async () => {
    let asked = 0;
    const g = new SsrfGuard({
      lookup: () => {
        asked++;
        return new Promise(() => undefined);
      },
    });
    expect((await g.checkUrlResolved('http://93.184.216.34/h')).hostname).toBe('93.184.216.34');
    expect((await g.checkUrlResolved('http://[2606:4700:4700::1111]/h')).hostname).toBe('[2606:4700:4700::1111]');
    expect(asked).toBe(0);
  });
});

/** Answers as getaddrinfo does: family 4 or 6 only that family's addresses, 0 both. */
const dual: HostLookup = async (hostname, family) => {
  if (hostname !== 'dual.test') throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  const all = [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ];
  return family === 0 ? all : all.filter((a) => a.family === family);
};

describe('the guard lookup and its resolver', () => {
  it.each([
    [4, ['93.184.216.34']],
    [6, ['2606:2800:220:1::1']],
    [undefined, ['93.184.216.34', '2606:2800:220:1::1']],
    [0, ['93.184.216.34', '2606:2800:220:1::1']],
  ])('asks the resolver for the family net.connect asks for (%s)', async (family, addresses) => {
    const guard = new SsrfGuard({ lookup: dual });
    const { err, address } = await lookupVia(guard, 'dual.test', family === undefined ? { all: true } : { all: true, family });
    expect(err).toBeNull();
    expect((address as Array<{ address: string }>).map((a) => a.address)).toEqual(addresses);
  });

  it('turns an empty answer into ENOTFOUND, in both callback forms', async () => {
    const guard = new SsrfGuard({ lookup: async () => [] });
    for (const all of [true, false]) {
      const { err } = await lookupVia(guard, 'empty.test', { all });
      expect(err?.code).toBe('ENOTFOUND');
      expect(err?.message).toBe('getaddrinfo ENOTFOUND empty.test');
    }
  });

  it('uses the system resolver by default: localhost is refused as loopback, and allowed once opened', async () => {
    const { err } = await lookupVia(new SsrfGuard(), 'localhost', { all: true });
    expect(err).toBeInstanceOf(BlockedAddressError);
    const refused = err as BlockedAddressError;
    expect(refused.name).toBe('BlockedAddressError');
    expect(refused.range.name).toBe('loopback');
    expect(refused.message).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), which is in loopback/);

    const open = new SsrfGuard({ allowNetworks: ['127.0.0.0/8', '::1/128'] });
    const ok = await lookupVia(open, 'localhost', { all: true });
    expect(ok.err).toBeNull();
    const got = (ok.address as Array<{ address: string; family: number }>).map((a) => a.address);
    expect(got.length).toBeGreaterThan(0);
    for (const a of got) expect(['127.0.0.1', '::1']).toContain(a);
  });
});
