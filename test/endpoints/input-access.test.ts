// What the endpoints API and CLI accept (src/endpoints/input.ts), who may touch what
// (src/endpoints/access.ts) and what sealed values are bound to (src/endpoints/codec.ts), without a
// database: every refusal names its field, every bound is checked on both sides.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox, SecretBoxError } from '../../src/crypto/secret-box.js';
import { checkServiceTopics, notFound, withinGrants, type Actor } from '../../src/endpoints/access.js';
import { codecOf, headerContext, openHeaders, sealHeaders, secretContext } from '../../src/endpoints/codec.js';
import { createEndpointInput, updateEndpointInput } from '../../src/endpoints/input.js';
import { refusal } from '../helpers/refusal.js';

const OK = { name: 'billing-hooks', url: 'https://hooks.example.com/acw', topics: ['billing.*'] };

/** [field path, message] of each issue, or the parsed value. */
function create(input: Record<string, unknown>): unknown {
  const r = createEndpointInput.safeParse(input);
  return r.success ? r.data : r.error.issues.map((i) => [i.path.join('.'), i.message]);
}

describe('createEndpointInput', () => {
  it('accepts the smallest endpoint, and keeps what it is given', () => {
    expect(create(OK)).toEqual(OK);
    expect(
      create({
        ...OK,
        scheme: 'standard',
        headers: { 'X-Token': 'abc' },
        timeout: '2.5s',
        max_in_flight: 4,
        rate_limit: ' 20/s ',
        enabled: false,
        description: 'billing events',
        secret: 'a-secret-of-16ch',
      }),
    ).toEqual({
      ...OK,
      scheme: 'standard',
      headers: { 'X-Token': 'abc' },
      timeout: 2_500,
      max_in_flight: 4,
      rate_limit: '20/s',
      enabled: false,
      description: 'billing events',
      secret: 'a-secret-of-16ch',
    });
  });

  it.each([
    [{ url: 42 }, 'url', 'expected a URL string'],
    [{ url: 'not a url' }, 'url', 'expected an http(s) URL like "https://hooks.example.com/acw"'],
    [{ url: 'ftp://hooks.example.com/x' }, 'url', 'expected an http or https URL, got scheme "ftp"'],
    [{ url: 'javascript:alert(1)' }, 'url', 'expected an http or https URL, got scheme "javascript"'],
    [{ url: 'abcdefghijklmnopqrstuvwxyz://h.example.com/' }, 'url', 'expected an http or https URL, got scheme "abcdefghijklmnopqrst"'],
    [{ url: 'https://user@hooks.example.com/' }, 'url', 'must not carry user-info (user:password@): put credentials in headers'],
    [{ url: 'https://:pw@hooks.example.com/' }, 'url', 'must not carry user-info (user:password@): put credentials in headers'],
    [{ url: `https://hooks.example.com/${'a'.repeat(2048 - 26 + 1)}` }, 'url', 'must be at most 2048 characters'],
    [{ timeout: '0s' }, 'timeout', 'must be longer than 0, got "0s"'],
    [{ timeout: '99ms' }, 'timeout', 'must be from 100ms to 60s'],
    [{ name: 'ok-name!' }, 'name', 'expected an endpoint name like "billing-hooks" (lowercase, digits, "_-"), got "ok-name!"'],
    [{ name: '!ok-name' }, 'name', 'expected an endpoint name like "billing-hooks" (lowercase, digits, "_-"), got "!ok-name"'],
    [{ name: '_x' }, 'name', 'expected an endpoint name like "billing-hooks" (lowercase, digits, "_-"), got "_x"'],
    [{ name: 'Billing' }, 'name', 'expected an endpoint name like "billing-hooks" (lowercase, digits, "_-"), got "Billing"'],
    [{ name: 'a'.repeat(64) }, 'name', `expected an endpoint name like "billing-hooks" (lowercase, digits, "_-"), got "${'a'.repeat(64)}"`],
    [{ timeout: '60001ms' }, 'timeout', 'must be from 100ms to 60s'],
    [{ description: 'x'.repeat(501) }, 'description', 'must be at most 500 characters'],
    [{ description: 'bell\u0007' }, 'description', 'expected printable characters'],
    [{ description: 3 }, 'description', 'expected a string'],
    [{ rate_limit: 5 }, 'rate_limit', 'expected a rate like "20/s" or "600/min" (more than 0), got 5'],
    [{ rate_limit: '0/s' }, 'rate_limit', 'expected a rate like "20/s" or "600/min" (more than 0), got "0/s"'],
    [{ scheme: 'hmac' }, 'scheme', 'expected one of "acw", "standard"'],
    [{ enabled: 'yes' }, 'enabled', 'expected true or false'],
    [{ secret: 'fifteen-chars!!' }, 'secret', 'must be at least 16 characters'],
    [{ secret: 'x'.repeat(513) }, 'secret', 'must be at most 512 characters'],
    [{ secret: 7 }, 'secret', 'expected a string'],
    [{ topics: Array.from({ length: 101 }, (_, i) => `t.n${i}`) }, 'topics', 'at most 100 topics'],
  ])('refuses %j naming %s', (over, field, message) => {
    expect(create({ ...OK, ...over })).toEqual([[field, message]]);
  });

  it.each([
    [{ url: `https://hooks.example.com/${'a'.repeat(2048 - 26)}` }],
    [{ timeout: '100ms' }],
    [{ timeout: '60s' }],
    [{ description: '' }],
    [{ description: 'x'.repeat(500) }],
    [{ rate_limit: null }],
    [{ secret: 'x'.repeat(16) }],
    [{ secret: 'x'.repeat(512) }],
    [{ topics: Array.from({ length: 100 }, (_, i) => `t.n${i}`) }],
    [{ name: `a${'-_9'.repeat(20)}xy` }],
    [{ name: '0' }],
    [{ url: 'http://hooks.example.com/' }],
  ])('accepts the bound %j', (over) => {
    expect(createEndpointInput.safeParse({ ...OK, ...over }).success).toBe(true);
  });

  it('a rate limit keeps its text, trimmed, for display', () => {
    expect((create({ ...OK, rate_limit: ' 600/min ' }) as { rate_limit: string }).rate_limit).toBe('600/min');
  });
});

describe('updateEndpointInput', () => {
  it('needs at least one field, and checks each one it gets as a create does', () => {
    const r = updateEndpointInput.safeParse({});
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.message)).toEqual(['expected at least one field to change']);
    expect(updateEndpointInput.safeParse({ description: 'x' }).data).toEqual({ description: 'x' });
    expect(updateEndpointInput.safeParse({ url: 'ftp://h.example.com/' }).error?.issues[0]?.message).toBe(
      'expected an http or https URL, got scheme "ftp"',
    );
    // A name or a secret is not changed this way.
    expect(updateEndpointInput.safeParse({ name: 'other' }).success).toBe(false);
    expect(updateEndpointInput.safeParse({ secret: 'x'.repeat(20) }).success).toBe(false);
  });
});

describe('withinGrants', () => {
  it.each([
    ['billing.paid', ['*'], true],
    ['*', ['*'], true],
    ['billing.paid', ['billing.paid'], true],
    ['billing.paid', ['orders.x', 'billing.*'], true],
    ['billing.refund.*', ['billing.*'], true],
    ['billing.*', ['billing.*'], true],
    ['billing.refund.done', ['billing.refund.*'], true],
    ['billing', ['billing.*'], false],
    // Not a topic (the input schema refuses it first), and not within billing.* either.
    ['billing.', ['billing.*'], false],
    ['billings.paid', ['billing.*'], false],
    ['billing.*', ['billing.refund.*'], false],
    ['*', ['billing.*'], false],
    ['billing.paid', ['billing'], false],
    ['billing.paid', ['billing.pai'], false],
    ['billing.paid', [], false],
  ] as const)('%s within %j: %s', (topic, grants, ok) => {
    expect(withinGrants(topic, grants)).toBe(ok);
  });
});

describe('checkServiceTopics', () => {
  const service: Actor = { name: 'billing-svc', role: 'service' };

  it('lets an admin subscribe to anything, even with nothing granted', () => {
    expect(() => checkServiceTopics({ name: 'ops', role: 'admin' }, ['*'], [])).not.toThrow();
  });

  it('refuses a service everything when services are granted nothing', () => {
    const err = refusal(() => checkServiceTopics(service, [], []));
    expect([err.status, err.code, err.message]).toEqual([
      403,
      'forbidden',
      'role service may not manage endpoints: notify.webhook.service_endpoints.topics grants none',
    ]);
  });

  it('names the first topic outside the grants, by index, with the grants', () => {
    expect(() => checkServiceTopics(service, ['billing.paid', 'billing.refund.*'], ['billing.*'])).not.toThrow();
    const err = refusal(() => checkServiceTopics(service, ['billing.paid', 'orders.new', '*'], ['billing.*', 'audit.x']));
    expect([err.status, err.code, err.message, err.details]).toEqual([
      403,
      'forbidden',
      'topics[1]: "orders.new" is outside the topics granted to services (billing.*, audit.x)',
      { field: 'topics[1]' },
    ]);
  });
});

describe('notFound', () => {
  it('names the endpoint, quoted and cut to 100 characters', () => {
    expect(notFound('gone')).toMatchObject({
      status: 404,
      code: 'not_found',
      message: 'name: no endpoint named "gone"',
      details: { field: 'name' },
    });
    expect(notFound('x'.repeat(150)).message).toBe(`name: no endpoint named "${'x'.repeat(100)}"`);
  });
});

describe('the codec', () => {
  const codec = codecOf(new SecretBox(randomBytes(32)))!;

  it('is none without a key', () => {
    expect(codecOf(null)).toBeNull();
  });

  it('binds a secret to its endpoint and to which secret it is', () => {
    expect(secretContext('orders', 'secret')).toBe('endpoint:orders:secret');
    expect(secretContext('orders', 'secret_next')).toBe('endpoint:orders:secret_next');
    const sealed = codec.seal('s3cret', secretContext('orders', 'secret'));
    expect(codec.open(sealed, secretContext('orders', 'secret'))).toBe('s3cret');
    expect(() => codec.open(sealed, secretContext('orders', 'secret_next'))).toThrow(SecretBoxError);
    expect(() => codec.open(sealed, secretContext('billing', 'secret'))).toThrow(SecretBoxError);
  });

  it('binds a header value to its endpoint and its name, in any case', () => {
    expect(headerContext('orders', 'X-Token')).toBe('endpoint:orders:header:x-token');
    const sealed = sealHeaders(codec, 'orders', { 'X-Token': 'tok-1', Authorization: 'Bearer b' });
    expect(Object.keys(sealed)).toEqual(['X-Token', 'Authorization']);
    expect(Object.values(sealed).join()).not.toMatch(/tok-1|Bearer b/);
    expect(openHeaders(codec, 'orders', sealed)).toEqual({ 'X-Token': 'tok-1', Authorization: 'Bearer b' });
    // The same name in another case opens; another name or another endpoint does not.
    expect(openHeaders(codec, 'orders', { 'x-token': sealed['X-Token']! })).toEqual({ 'x-token': 'tok-1' });
    expect(() => openHeaders(codec, 'orders', { 'X-Other': sealed['X-Token']! })).toThrow(SecretBoxError);
    expect(() => openHeaders(codec, 'billing', sealed)).toThrow(SecretBoxError);
    expect(sealHeaders(codec, 'orders', {})).toEqual({});
  });
});
