// The SSRF guard (docs/operations.md#ssrf-guard): every range that is not global unicast, as IP
// literals (v4, v6, IPv4-mapped, decimal and hex forms through the URL parser), as host names that
// resolve to them (an injected lookup), the allow list, and connections pinned to the checked address.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { blockedRange, BlockedAddressError, MAX_URL_LENGTH, parseCidr, SsrfGuard, type HostLookup } from '../../src/net/ssrf.js';
import { classifyError } from '../../src/webhook/classify.js';
import { deliveryPoolOptions, sendWebhook } from '../../src/webhook/send.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { refusal } from '../helpers/refusal.js';

/** [address, the range name it must be refused with]. */
const BLOCKED: ReadonlyArray<readonly [string, string]> = [
  ['0.0.0.0', '"this network"'],
  ['0.1.2.3', '"this network"'],
  ['10.0.0.1', 'private (RFC 1918)'],
  ['172.16.0.1', 'private (RFC 1918)'],
  ['172.31.255.255', 'private (RFC 1918)'],
  ['192.168.1.1', 'private (RFC 1918)'],
  ['100.64.0.1', 'shared address space (CGNAT)'],
  ['100.127.255.254', 'shared address space (CGNAT)'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['169.254.169.254', 'link-local (cloud metadata)'],
  ['169.254.1.1', 'link-local'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['192.0.2.1', 'documentation (TEST-NET-1)'],
  ['198.51.100.7', 'documentation (TEST-NET-2)'],
  ['203.0.113.9', 'documentation (TEST-NET-3)'],
  ['192.88.99.1', '6to4 relay anycast'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
  ['64:ff9b::7f00:1', 'NAT64'],
  ['64:ff9b::808:808', 'NAT64'],
  ['64:ff9b:1::1', 'NAT64 (local use)'],
  ['100::1', 'discard-only'],
  ['2001::1', 'Teredo'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
  ['2001:db8::1', 'documentation'],
  ['2001:2::1', 'IETF protocol assignments'],
  ['2002:7f00:1::1', '6to4'],
  ['3fff::1', 'documentation'],
  ['fc00::1', 'unique local (ULA)'],
  ['fd12:3456:789a::1', 'unique local (ULA)'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['ff02::1', 'multicast'],
  ['ff05::1:3', 'multicast'],
  ['::ffff:0:7f00:1', 'reserved (outside global unicast 2000::/3)'],
  ['4000::1', 'reserved (outside global unicast 2000::/3)'],
  // IPv4-mapped forms, dotted and hex.
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback'],
  ['::ffff:10.1.2.3', 'IPv4-mapped private (RFC 1918)'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped link-local (cloud metadata)'],
  ['::ffff:0.0.0.0', 'IPv4-mapped "this network"'],
  ['::ffff:100.64.0.1', 'IPv4-mapped shared address space (CGNAT)'],
  ['::ffff:224.0.0.1', 'IPv4-mapped multicast'],
  ['::ffff:198.18.0.1', 'IPv4-mapped benchmarking'],
  ['::ffff:240.0.0.1', 'IPv4-mapped reserved'],
  ['::ffff:192.0.2.1', 'IPv4-mapped documentation (TEST-NET-1)'],
  ['0:0:0:0:0:ffff:c0a8:0101', 'IPv4-mapped private (RFC 1918)'],
];

const GLOBAL = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.216.34',
  '100.63.255.255',
  '100.128.0.1',
  '172.15.255.255',
  '172.32.0.1',
  '198.17.255.255',
  '198.20.0.1',
  '223.255.255.255',
  '2606:4700:4700::1111',
  '2a00:1450:4001::1',
  '::ffff:8.8.8.8',
  '2001:4860:4860::8888',
];

/** A resolver of fixed answers: host name -> addresses. */
function fixedLookup(table: Record<string, string[]>): HostLookup {
  return async (hostname) => {
    const addresses = table[hostname];
    if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

describe('blockedRange', () => {
  it.each(BLOCKED)('refuses %s as %s', (address, name) => {
    expect(blockedRange(address)?.name).toBe(name);
  });

  it.each(GLOBAL)('lets the global unicast address %s through', (address) => {
    expect(blockedRange(address)).toBeNull();
  });

  it('names the CIDR, the mapped one for an IPv4-mapped address', () => {
    expect(blockedRange('10.9.8.7')).toEqual({ name: 'private (RFC 1918)', cidr: '10.0.0.0/8' });
    expect(blockedRange('::ffff:127.0.0.1')).toEqual({ name: 'IPv4-mapped loopback', cidr: '::ffff:127.0.0.0/104' });
  });

  it('refuses anything that is not an IP literal rather than letting it pass', () => {
    expect(blockedRange('example.com')?.name).toBe('not an IP address');
    expect(blockedRange('[::1]')?.name).toBe('not an IP address');
  });
});

describe('checkUrl', () => {
  const guard = new SsrfGuard();

  it.each([
    ['http://2130706433/', '127.0.0.1', 'loopback'],
    ['http://0x7f000001/', '127.0.0.1', 'loopback'],
    ['http://0177.0.0.1/', '127.0.0.1', 'loopback'],
    ['http://127.1/', '127.0.0.1', 'loopback'],
    ['https://0xA9FEA9FE/latest/meta-data', '169.254.169.254', 'link-local (cloud metadata)'],
    ['http://10.0.0.1:8080/hook', '10.0.0.1', 'private (RFC 1918)'],
    ['http://[::1]/', '::1', 'loopback'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1', 'IPv4-mapped loopback'],
    ['http://[::ffff:a9fe:a9fe]/', '::ffff:a9fe:a9fe', 'IPv4-mapped link-local (cloud metadata)'],
    ['http://[fd00::1]:9000/', 'fd00::1', 'unique local (ULA)'],
    ['http://[64:ff9b::a00:1]/', '64:ff9b::a00:1', 'NAT64'],
    ['http://localhost:8080/', '127.0.0.1', 'loopback'],
    ['http://api.localhost./', '127.0.0.1', 'loopback'],
  ])('refuses %s as %s (%s), naming the field', (url, address, range) => {
    const err = refusal(() => guard.checkUrl(url));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/^url: /);
    expect(err.message).toContain(address);
    expect(err.message).toContain(range);
    expect(err.details).toMatchObject({ field: 'url', reason: 'blocked_address', range });
  });

  it('accepts a public address or a host name (resolved at connect), normalised', () => {
    expect(guard.checkUrl('https://hooks.example.com/in?x=1').hostname).toBe('hooks.example.com');
    expect(guard.checkUrl('http://134744072/').hostname).toBe('8.8.8.8');
    expect(guard.checkUrl('http://[2606:4700:4700::1111]/').hostname).toBe('[2606:4700:4700::1111]');
  });

  it.each([
    ['ftp://example.com/', /"ftp:" URL/],
    ['file:///etc/passwd', /"file:" URL/],
    ['javascript:alert(1)', /"javascript:" URL/],
    ['not a url', /does not parse/],
    ['https://user:pw@example.com/', /user-info/],
    ['https://user@example.com/', /user-info/],
    [`https://example.com/${'a'.repeat(MAX_URL_LENGTH)}`, /at most 2048 characters/],
  ])('refuses %s naming the field', (url, why) => {
    const err = refusal(() => guard.checkUrl(url, 'url'));
    expect(err.message).toMatch(/^url: /);
    expect(err.message).toMatch(why);
    expect(err.message).not.toContain('pw');
  });

  it('refuses a non-string', () => {
    expect(refusal(() => guard.checkUrl(42)).message).toBe('url: expected an http:// or https:// URL, got number');
  });

  it('lets allow_networks open a range: 127.0.0.0/8 admits 127.0.0.1 in every form', () => {
    const open = new SsrfGuard({ allowNetworks: ['127.0.0.0/8'] });
    for (const url of [
      'http://127.0.0.1:1/',
      'http://2130706433/',
      'http://0x7f000001/',
      'http://[::ffff:127.0.0.1]/',
      'http://localhost/',
    ]) {
      expect(() => open.checkUrl(url)).not.toThrow();
    }
    // Only what it lists: ::1 and 10/8 stay refused.
    expect(refusal(() => open.checkUrl('http://[::1]/')).message).toContain('loopback');
    expect(refusal(() => open.checkUrl('http://10.0.0.1/')).message).toContain('RFC 1918');
  });

  it('checkUrlResolved refuses a name that resolves into a blocked range, and accepts one that does not resolve', async () => {
    const g = new SsrfGuard({
      lookup: fixedLookup({ 'internal.test': ['10.1.2.3'], 'mixed.test': ['8.8.8.8', 'fd00::5'], 'ok.test': ['8.8.4.4'] }),
    });
    await expect(g.checkUrlResolved('https://internal.test/h')).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/^url: internal\.test resolves to 10\.1\.2\.3, which is in private \(RFC 1918\) 10\.0\.0\.0\/8/),
    });
    await expect(g.checkUrlResolved('https://mixed.test/h')).rejects.toMatchObject({ details: { range: 'unique local (ULA)' } });
    await expect(g.checkUrlResolved('https://ok.test/h')).resolves.toBeInstanceOf(URL);
    await expect(g.checkUrlResolved('https://nowhere.test/h')).resolves.toBeInstanceOf(URL);
  });

  describe('a resolver that does not answer', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('checkUrlResolved waits 2 s for it, then lets the name through (every connection checks it again)', async () => {
      vi.useFakeTimers();
      let asked = 0;
      // Never settles: a DNS zone that does not answer.
      const g = new SsrfGuard({
        lookup: () => {
          asked++;
          return new Promise(() => undefined);
        },
      });
      let settled: URL | Error | undefined;
      g.checkUrlResolved('https://slow.test/h').then(
        (u) => (settled = u),
        (e: Error) => (settled = e),
      );
      await vi.advanceTimersByTimeAsync(1_999);
      expect({ asked, settled }).toEqual({ asked: 1, settled: undefined });
      await vi.advanceTimersByTimeAsync(1);
      expect(settled).toBeInstanceOf(URL);
      expect((settled as URL).hostname).toBe('slow.test');
      // The timer is cleared with the answer: nothing left pending for the event loop.
      expect(vi.getTimerCount()).toBe(0);
    });

    it('an answer within the 2 s is still checked: a blocked one is refused, and its timer cleared', async () => {
      vi.useFakeTimers();
      const g = new SsrfGuard({ lookup: () => new Promise((r) => setTimeout(r, 1_500, [{ address: '10.0.0.1', family: 4 }])) });
      const check = g.checkUrlResolved('https://late.test/h').catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(1_500);
      expect(await check).toMatchObject({ status: 400, details: { field: 'url', range: 'private (RFC 1918)' } });
      expect(vi.getTimerCount()).toBe(0);
    });
  });
});

const lookupVia = (guard: SsrfGuard, host: string, all: boolean) =>
  new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((resolve) =>
    guard.lookup(host, { all }, (err, address) => resolve({ err, address })),
  );

describe('the guard lookup (net.connect)', () => {
  it.each(BLOCKED)('refuses a host name resolving to %s (%s), in both callback forms', async (address, name) => {
    const guard = new SsrfGuard({ lookup: fixedLookup({ 'evil.test': [address] }) });
    for (const all of [true, false]) {
      const { err } = await lookupVia(guard, 'evil.test', all);
      expect(err).toBeInstanceOf(BlockedAddressError);
      expect((err as BlockedAddressError).range.name).toBe(name);
      expect(err?.code).toBe('ACW_BLOCKED_ADDRESS');
      expect(err?.message).toContain(`evil.test resolves to ${address}`);
    }
  });

  it('refuses the host when any one of its addresses is blocked', async () => {
    const guard = new SsrfGuard({ lookup: fixedLookup({ 'dual.test': ['2606:4700::1', '127.0.0.1'] }) });
    const { err } = await lookupVia(guard, 'dual.test', true);
    expect((err as BlockedAddressError).range.name).toBe('loopback');
  });

  it('hands over exactly the checked addresses', async () => {
    const guard = new SsrfGuard({ lookup: fixedLookup({ 'ok.test': ['8.8.8.8', '2001:4860:4860::8888'] }) });
    expect((await lookupVia(guard, 'ok.test', true)).address).toEqual([
      { address: '8.8.8.8', family: 4 },
      { address: '2001:4860:4860::8888', family: 6 },
    ]);
    expect((await lookupVia(guard, 'ok.test', false)).address).toBe('8.8.8.8');
  });

  it('passes a resolver failure through (a retryable dns error)', async () => {
    const { err } = await lookupVia(new SsrfGuard({ lookup: fixedLookup({}) }), 'nowhere.test', true);
    expect(err?.code).toBe('ENOTFOUND');
  });

  it('a refusal is a permanent blocked_address failure', () => {
    const err = new BlockedAddressError('evil.test', '169.254.169.254', blockedRange('169.254.169.254')!);
    expect(classifyError(err)).toEqual({
      kind: 'permanent',
      errorKind: 'blocked_address',
      message: expect.stringContaining(
        'ACW_BLOCKED_ADDRESS: evil.test resolves to 169.254.169.254, which is in link-local (cloud metadata)',
      ),
    });
  });
});

describe('parseCidr', () => {
  it.each([
    ['127.0.0.0/8', { network: '127.0.0.0', prefix: 8, family: 'ipv4' }],
    ['10.20.30.40', { network: '10.20.30.40', prefix: 32, family: 'ipv4' }],
    ['fd00::/8', { network: 'fd00::', prefix: 8, family: 'ipv6' }],
    ['::1', { network: '::1', prefix: 128, family: 'ipv6' }],
    ['0.0.0.0/0', { network: '0.0.0.0', prefix: 0, family: 'ipv4' }],
  ])('parses %s', (text, cidr) => {
    expect(parseCidr(text)).toEqual(cidr);
  });

  it.each([
    ['10.0.0.0/33', /prefix length from 0 to 32/],
    ['fd00::/129', /prefix length from 0 to 128/],
    ['10.0.0.0/', /prefix length/],
    ['10.0.0.0/8x', /prefix length/],
    ['10.1.0.0/8', /host bits set past \/8/],
    ['fd00::1/8', /host bits set past \/8/],
    ['10.0.0/8', /expected a network/],
    ['example.com/24', /expected a network/],
    ['', /expected a network/],
  ])('refuses %s', (text, why) => {
    expect(parseCidr(text)).toMatch(why);
  });
});

async function post(url: string, guard: SsrfGuard) {
  const pool = new Pool(new URL(url).origin, deliveryPoolOptions(2, 2_000, guard));
  try {
    return await sendWebhook({ agent: pool, url, headers: { 'content-type': 'application/json' }, body: '{}', timeoutMs: 5_000 });
  } finally {
    await pool.close();
  }
}

describe('pinned connections (a real receiver on 127.0.0.1)', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  it('refuses an IP-literal host at connect, permanently, naming the range', async () => {
    const before = receiver.requests.length;
    const { outcome } = await post(`${receiver.url}/hook`, new SsrfGuard());
    expect(outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    expect(outcome.kind !== 'delivered' && outcome.message).toContain('127.0.0.1 is in loopback 127.0.0.0/8');
    expect(receiver.requests.length).toBe(before);
  });

  it('refuses a host name that resolves to the receiver, and connects to exactly that address once allowed', async () => {
    const port = new URL(receiver.url).port;
    const lookup = fixedLookup({ 'hooks.test': ['127.0.0.1'] });
    const refused = await post(`http://hooks.test:${port}/a`, new SsrfGuard({ lookup }));
    expect(refused.outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    expect(refused.outcome.kind !== 'delivered' && refused.outcome.message).toContain(
      'hooks.test resolves to 127.0.0.1, which is in loopback',
    );

    const before = receiver.requests.length;
    const sent = await post(`http://hooks.test:${port}/b`, new SsrfGuard({ lookup, allowNetworks: ['127.0.0.0/8'] }));
    expect(sent.outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(receiver.requests.slice(before).map((r) => [r.url, r.headers.host])).toEqual([['/b', `hooks.test:${port}`]]);
  });

  it('checks again at connect: a name that passed the write-time check and then rebinds to loopback is refused', async () => {
    const port = new URL(receiver.url).port;
    let answer = '93.184.216.34';
    const guard = new SsrfGuard({ lookup: async () => [{ address: answer, family: 4 }] });
    await guard.checkUrlResolved(`http://rebind.test:${port}/`);
    answer = '127.0.0.1';
    const { outcome } = await post(`http://rebind.test:${port}/`, guard);
    expect(outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
  });

  it('an IPv4-mapped literal ([::ffff:127.0.0.1]) is checked as the IPv4 address it carries at connect', async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.requests.length;
    // The URL parser writes it ::ffff:7f00:1; net.connect would reach 127.0.0.1 through it.
    const refused = await post(`http://[::ffff:127.0.0.1]:${port}/m`, new SsrfGuard());
    expect(refused.outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    expect(refused.outcome.kind !== 'delivered' && refused.outcome.message).toContain('::ffff:7f00:1 is in IPv4-mapped loopback');
    expect(receiver.requests.length).toBe(before);
    const sent = await post(`http://[::ffff:127.0.0.1]:${port}/m`, new SsrfGuard({ allowNetworks: ['127.0.0.0/8'] }));
    expect(sent.outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(receiver.requests.slice(before).map((r) => r.url)).toEqual(['/m']);
  });
});

describe('IPv6 literals at the connector (a real receiver on ::1)', () => {
  let server: Server;
  let port: number;
  const got: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      got.push(req.url ?? '');
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  // net.connect never calls the lookup for an IP literal: only the connector's own check stands here.
  it('refuses http://[::1]:port/ with nothing allowed, naming the range, and sends nothing', async () => {
    const before = got.length;
    const { outcome } = await post(`http://[::1]:${port}/v6`, new SsrfGuard());
    expect(outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    expect(outcome.kind !== 'delivered' && outcome.message).toContain('::1 is in loopback ::1/128');
    expect(got.length).toBe(before);
  });

  it('delivers to http://[::1]:port/ once allow_networks opens ::1/128, and not for 127.0.0.0/8 alone', async () => {
    const v4Only = await post(`http://[::1]:${port}/v6`, new SsrfGuard({ allowNetworks: ['127.0.0.0/8'] }));
    expect(v4Only.outcome).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    const before = got.length;
    const sent = await post(`http://[::1]:${port}/v6-open`, new SsrfGuard({ allowNetworks: ['::1/128'] }));
    expect(sent.outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(got.slice(before)).toEqual(['/v6-open']);
  });
});
