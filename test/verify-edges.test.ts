// Edges of receiver-side verification (src/verify.ts, `acw-webhooks/verify`) that mutation testing
// found unchecked by test/webhook/verify.test.ts: secret lists (rotation), the Next header, header
// values that are almost well-formed, several standard signatures in one header, and plain header
// objects as Node and hand-written callers give them.
import { describe, expect, it } from 'vitest';
import { verifyWebhookDetailed, type VerifyWebhookOptions, type WebhookHeaders } from '../src/verify.js';
import { signAcw, signStandard } from '../src/webhook/sign.js';

const BODY = '{"event_id":"e1","topic":"t.x","data":{"n":1}}';
const NOW = 1_700_000_000_000;
const TS = NOW / 1000;
const ID = 'evt-1';
const OLD = 'old-acw-secret-0123456789';
const NEW = 'new-acw-secret-9876543210';
const WHSEC = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const WHSEC_2 = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;

const hexOf = (secret: string, ts = TS) => signAcw(secret, ts, BODY).slice('sha256='.length);

function acw(over: Record<string, string | string[] | undefined> = {}): Record<string, string | string[] | undefined> {
  return { 'x-acw-signature': `sha256=${hexOf(OLD)}`, 'x-acw-timestamp': String(TS), 'x-acw-event-id': ID, ...over };
}

function std(over: Record<string, string | string[] | undefined> = {}): Record<string, string | string[] | undefined> {
  return { 'webhook-signature': signStandard(WHSEC, ID, TS, BODY), 'webhook-timestamp': String(TS), 'webhook-id': ID, ...over };
}

const check = (secret: VerifyWebhookOptions['secret'], headers: WebhookHeaders, extra: Partial<VerifyWebhookOptions> = {}) =>
  verifyWebhookDetailed({ secret, headers, body: BODY, now: NOW, ...extra });

const ok = (scheme: 'acw' | 'standard', secretIndex = 0, timestamp = TS) => ({ ok: true, scheme, timestamp, id: ID, secretIndex });
const no = (reason: string) => ({ ok: false, reason });

/** The acw headers signed at `ts`, checked. */
const at = (ts: number) => check(OLD, acw({ 'x-acw-signature': signAcw(OLD, ts, BODY), 'x-acw-timestamp': String(ts) }));

describe('the tolerance', () => {
  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('refuses toleranceSeconds %s as a setup mistake', (toleranceSeconds) => {
    expect(() => check(OLD, acw(), { toleranceSeconds })).toThrow(new RangeError('toleranceSeconds must be a non-negative number'));
  });

  it('accepts 0: only the exact second', () => {
    expect(check(OLD, acw(), { toleranceSeconds: 0 })).toEqual(ok('acw'));
    expect(
      check(OLD, acw({ 'x-acw-signature': signAcw(OLD, TS + 1, BODY), 'x-acw-timestamp': String(TS + 1) }), { toleranceSeconds: 0 }),
    ).toEqual(no('timestamp_in_future'));
  });

  it('accepts a timestamp exactly the tolerance ahead, and not one second more', () => {
    expect(at(TS + 300)).toEqual(ok('acw', 0, TS + 300));
    expect(at(TS + 301)).toEqual(no('timestamp_in_future'));
  });
});

describe('secret lists (a rotation)', () => {
  it('accepts a delivery signed with any secret of the list, saying which', () => {
    expect(check([NEW, OLD], acw())).toEqual(ok('acw', 1));
    expect(check([OLD, NEW], acw())).toEqual(ok('acw', 0));
    expect(check([WHSEC_2, WHSEC], std())).toEqual(ok('standard', 1));
  });

  it('names the first secret that matches when several do', () => {
    // Old in X-ACW-Signature, new in X-ACW-Signature-Next: both secrets match.
    const both = acw({ 'x-acw-signature-next': `sha256=${hexOf(NEW)}` });
    expect(check([OLD, NEW], both)).toEqual(ok('acw', 0));
    expect(check([NEW, OLD], both)).toEqual(ok('acw', 0));
    const twoEntries = std({ 'webhook-signature': `${signStandard(WHSEC_2, ID, TS, BODY)} ${signStandard(WHSEC, ID, TS, BODY)}` });
    expect(check([WHSEC, WHSEC_2], twoEntries)).toEqual(ok('standard', 0));
    expect(check([WHSEC_2, WHSEC], twoEntries)).toEqual(ok('standard', 0));
  });

  it.each([
    ['an empty list', []],
    ['a list holding a non-string', [OLD, 42]],
    ['a list of non-strings', [42]],
    ['an acw list holding an empty secret', [OLD, '']],
    ['an object that is not a list', { 0: OLD, length: 1 }],
  ])('refuses %s as bad_secret', (_name, secret) => {
    expect(check(secret as unknown as string[], acw())).toEqual(no('bad_secret'));
  });

  it.each([
    ['a standard list holding a non-whsec secret', [WHSEC, OLD]],
    ['a secret without the whsec_ prefix even when the rest is base64', 'abcdefQUJDREVG'],
    ['a whsec_ secret that is not base64', 'whsec_not*base64'],
  ])('refuses %s as bad_secret', (_name, secret) => {
    expect(check(secret, std())).toEqual(no('bad_secret'));
  });

  it('takes a whsec_ key with any valid padding', () => {
    for (const bytes of [30, 31, 32]) {
      const key = `whsec_${Buffer.alloc(bytes, 9).toString('base64')}`;
      expect(check(key, std({ 'webhook-signature': signStandard(key, ID, TS, BODY) }))).toEqual(ok('standard'));
    }
  });
});

describe('X-ACW-Signature-Next', () => {
  it('is checked too: a receiver that only has the new secret accepts it', () => {
    expect(check(NEW, acw({ 'x-acw-signature-next': `sha256=${hexOf(NEW)}` }))).toEqual(ok('acw'));
    expect(check(NEW, acw())).toEqual(no('signature_mismatch'));
  });

  it('makes the delivery malformed when it is malformed itself, even with a good X-ACW-Signature', () => {
    expect(check(OLD, acw({ 'x-acw-signature-next': 'garbage' }))).toEqual(no('malformed_header'));
  });
});

describe('acw headers almost well-formed', () => {
  const hex = hexOf(OLD);
  it.each([
    ['another prefix of the same length', `sha257=${hex}`],
    ['no prefix but seven more characters', `1234567${hex}`],
    ['junk before the hex', `sha256=zz${hex}`],
    ['junk after the hex', `sha256=${hex}zz`],
    ['an odd number of hex digits', `sha256=${hex}0`],
  ])('refuses %s as malformed', (_name, sig) => {
    expect(check(OLD, acw({ 'x-acw-signature': sig }))).toEqual(no('malformed_header'));
  });

  it.each([
    ['an empty event id', { 'x-acw-event-id': '' }, 'malformed_header'],
    ['two different timestamps', { 'x-acw-timestamp': [String(TS), String(TS - 1)] }, 'malformed_header'],
    ['two different event ids', { 'x-acw-event-id': [ID, 'evt-2'] }, 'malformed_header'],
    ['no timestamp', { 'x-acw-timestamp': undefined }, 'missing_header'],
    ['an empty list of signature values (and no other scheme)', { 'x-acw-signature': [] }, 'missing_header'],
  ])('refuses %s', (_name, over, reason) => {
    expect(check(OLD, acw(over))).toEqual(no(reason));
  });

  it('takes values that differ only in surrounding white space as one', () => {
    const sig = `sha256=${hex}`;
    expect(check(OLD, acw({ 'x-acw-signature': [sig, ` ${sig} `], 'x-acw-timestamp': ` ${TS} ` }))).toEqual(ok('acw'));
  });

  it('reads a plain object in any case, merging names that differ only in case', () => {
    expect(check(OLD, { 'X-ACW-Signature': `sha256=${hex}`, 'X-Acw-Timestamp': String(TS), 'X-ACW-EVENT-ID': ID })).toEqual(ok('acw'));
    // The same header twice, in two cases, with different values: malformed, whichever comes first.
    const other = `sha256=${hexOf(NEW)}`;
    expect(check(OLD, { ...acw(), 'X-ACW-Signature': other })).toEqual(no('malformed_header'));
    expect(check(OLD, { 'X-ACW-Signature': other, ...acw() })).toEqual(no('malformed_header'));
    // Node's req.headers may hold undefined for a header it does not have.
    expect(check(OLD, acw({ 'x-acw-signature-next': undefined, 'webhook-signature': undefined }))).toEqual(ok('acw'));
  });

  it('prefers the acw headers when both schemes are present', () => {
    expect(check(OLD, { ...std(), ...acw() })).toEqual(ok('acw'));
  });
});

describe('standard headers almost well-formed', () => {
  const good = signStandard(WHSEC, ID, TS, BODY);
  const mac = good.slice(3);

  it.each([
    ['junk before the base64', `v1,!!${mac}`, 'malformed_header'],
    ['junk after the base64', `v1,${mac}!!`, 'malformed_header'],
    ['a version that is not v<n>', `x1,${mac}`, 'malformed_header'],
    ['a version with junk before it', `xv1,${mac}`, 'malformed_header'],
    ['a version with junk after it', `v1!,${mac}`, 'malformed_header'],
    ['no comma', 'v1abc', 'malformed_header'],
    ['a comma first', `,${mac}`, 'malformed_header'],
    ['a good MAC under another version', `v2,${mac}`, 'signature_mismatch'],
    ['a good MAC under a version of two digits', `v10,${mac}`, 'signature_mismatch'],
  ])('%s: %s', (_name, sig, reason) => {
    expect(check(WHSEC, std({ 'webhook-signature': sig }))).toEqual(no(reason));
  });

  it.each([
    ['one of several header lines', [`v1,${Buffer.alloc(32).toString('base64')}`, good]],
    ['a joined duplicate header ("a, b")', `${good}, v1,${Buffer.alloc(32).toString('base64')}`],
    ['extra white space around entries', `   ${good}   v2,abc=  `],
  ])('finds the good signature in %s', (_name, sig) => {
    expect(check(WHSEC, std({ 'webhook-signature': sig }))).toEqual(ok('standard'));
  });

  it.each([
    ['an empty id', { 'webhook-id': '' }, 'malformed_header'],
    ['two different timestamps', { 'webhook-timestamp': [String(TS), String(TS + 1)] }, 'malformed_header'],
    ['two different ids', { 'webhook-id': [ID, 'evt-2'] }, 'malformed_header'],
    ['a timestamp that is not a number', { 'webhook-timestamp': 'soon' }, 'malformed_header'],
    ['a timestamp of 16 digits', { 'webhook-timestamp': '1'.repeat(16) }, 'malformed_header'],
    ['no timestamp', { 'webhook-timestamp': undefined }, 'missing_header'],
  ])('refuses %s', (_name, over, reason) => {
    expect(check(WHSEC, std(over))).toEqual(no(reason));
  });
});

describe('the body', () => {
  it('is read exactly: a Uint8Array view into a larger buffer counts only its own bytes', () => {
    const bytes = Buffer.from(`xx${BODY}yy`);
    const view = new Uint8Array(bytes.buffer, bytes.byteOffset + 2, Buffer.byteLength(BODY));
    expect(verifyWebhookDetailed({ secret: OLD, headers: acw(), body: view, now: NOW })).toEqual(ok('acw'));
  });
});
