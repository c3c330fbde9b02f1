import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { buildHeaders, signAcw, signStandard } from '../../src/webhook/sign.js';
import { VERSION } from '../../src/version.js';

const SECRET = 'acw-test-secret-do-not-leak';
const WHSEC = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
const JOB = '0b6f7a52-3c55-4b6e-9d43-1f0a9a1f1c11';

describe('signAcw', () => {
  it('is sha256=<hex> of HMAC-SHA256(secret, "<ts>." + body)', () => {
    const body = '{"a":1}';
    const hex = createHmac('sha256', SECRET).update(`1700000000.${body}`).digest('hex');
    expect(signAcw(SECRET, 1700000000, body)).toBe(`sha256=${hex}`);
  });

  it('signs the utf8 bytes of non-ASCII bodies', () => {
    const body = '{"name":"Zoë ✓"}';
    const hex = createHmac('sha256', SECRET)
      .update(Buffer.from(`1.${body}`, 'utf8'))
      .digest('hex');
    expect(signAcw(SECRET, 1, body)).toBe(`sha256=${hex}`);
  });

  it('rejects a fractional timestamp', () => {
    expect(() => signAcw(SECRET, 1.5, '{}')).toThrow(RangeError);
  });
});

describe('signStandard', () => {
  it('matches the standardwebhooks library signature', () => {
    const body = '{"x":"y"}';
    const ts = 1700000123;
    expect(signStandard(WHSEC, JOB, ts, body)).toBe(new Webhook(WHSEC).sign(JOB, new Date(ts * 1000), body));
  });

  it('refuses a secret that is not whsec_<base64> without echoing it', () => {
    expect(() => signStandard(SECRET, JOB, 1, '{}')).toThrow(/whsec_<base64>/);
    let message = '';
    try {
      signStandard('whsec_not*base64', JOB, 1, '{}');
    } catch (err) {
      message = String(err);
    }
    expect(message).toMatch(/whsec_<base64>/);
    expect(message).not.toContain('not*base64');
  });
});

describe('buildHeaders', () => {
  const base = { secret: SECRET, jobId: JOB, topic: 'order.paid', body: '{"k":1}', timestamp: 1700000000 };

  it('sends the acw protocol headers', () => {
    const h = buildHeaders({ ...base, scheme: 'acw' });
    expect(h).toEqual({
      'content-type': 'application/json',
      'user-agent': `acw-webhooks/${VERSION}`,
      'X-ACW-Topic': 'order.paid',
      'X-ACW-Event-Id': JOB,
      'X-ACW-Timestamp': '1700000000',
      'X-ACW-Signature': signAcw(SECRET, 1700000000, '{"k":1}'),
    });
  });

  it('a keyed event carries X-ACW-Ordering-Key and X-ACW-Sequence in both schemes, the key encoded only when it must be', () => {
    for (const scheme of ['acw', 'standard'] as const) {
      const h = buildHeaders({ ...base, secret: scheme === 'acw' ? SECRET : WHSEC, scheme, orderingKey: 'order:42', orderingSeq: 7 });
      expect([h['X-ACW-Ordering-Key'], h['X-ACW-Sequence']]).toEqual(['order:42', '7']);
    }
    for (const key of ['commande é', '50%', ' lead', 'tab\there']) {
      const h = buildHeaders({ ...base, scheme: 'acw', orderingKey: key, orderingSeq: 1 });
      expect(h['X-ACW-Ordering-Key']).toMatch(/^[\x21-\x7e]+$/);
      expect(decodeURIComponent(h['X-ACW-Ordering-Key']!)).toBe(key);
    }
    // A receiver's decodeURIComponent of a key sent as it is gives it back too.
    expect(decodeURIComponent('order:42')).toBe('order:42');
    // Protocol headers: an endpoint's extra headers cannot set them.
    const extra = { 'x-acw-sequence': '999', 'X-ACW-Ordering-Key': 'forged' };
    expect(buildHeaders({ ...base, scheme: 'acw', extra })).not.toHaveProperty('x-acw-sequence');
    expect(buildHeaders({ ...base, scheme: 'acw', extra })).not.toHaveProperty('X-ACW-Ordering-Key');
  });

  it('sends the Standard Webhooks headers plus X-ACW-Topic for scheme standard', () => {
    const h = buildHeaders({ ...base, secret: WHSEC, scheme: 'standard' });
    expect(h).toEqual({
      'content-type': 'application/json',
      'user-agent': `acw-webhooks/${VERSION}`,
      'X-ACW-Topic': 'order.paid',
      'webhook-id': JOB,
      'webhook-timestamp': '1700000000',
      'webhook-signature': signStandard(WHSEC, JOB, 1700000000, '{"k":1}'),
    });
  });

  it('adds extra headers but never lets them replace protocol headers, in any case', () => {
    const h = buildHeaders({
      ...base,
      scheme: 'acw',
      extra: {
        Authorization: 'Bearer abc',
        'x-acw-signature': 'sha256=forged',
        'X-Acw-Timestamp': '1',
        'X-ACW-EVENT-ID': 'other',
        'Webhook-Signature': 'v1,forged',
        'Content-Length': '1',
        Host: 'evil.example',
      },
    });
    expect(h.Authorization).toBe('Bearer abc');
    expect(h['X-ACW-Signature']).toBe(signAcw(SECRET, 1700000000, '{"k":1}'));
    const names = Object.keys(h).map((n) => n.toLowerCase());
    expect(new Set(names).size).toBe(names.length);
    expect(names).not.toContain('webhook-signature');
    expect(names).not.toContain('content-length');
    expect(names).not.toContain('host');
  });
});
