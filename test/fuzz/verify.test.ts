// Property-based fuzzing of verifyWebhook (issue 18): whatever the headers and body, it answers
// true or false and never throws; it accepts a delivery only with the body and timestamp that
// were signed.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signAcw, signStandard } from '../../src/webhook/sign.js';
import { verifyWebhook, verifyWebhookDetailed, type WebhookHeaders } from '../../src/verify.js';
import { oddString, RUNS, SEED } from './arbitraries.js';

const params = (name: string): fc.Parameters<unknown> => {
  let h = SEED;
  for (const c of name) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return { seed: h, numRuns: RUNS };
};

const NAMES = [
  'x-acw-signature',
  'X-ACW-Signature',
  'x-acw-signature-next',
  'x-acw-timestamp',
  'X-Acw-Timestamp',
  'x-acw-event-id',
  'webhook-signature',
  'Webhook-Signature',
  'webhook-timestamp',
  'webhook-id',
  'content-type',
];

const hex = fc.uint8Array({ minLength: 0, maxLength: 40 }).map((b) => Buffer.from(b).toString('hex'));
const b64 = fc.uint8Array({ minLength: 0, maxLength: 40 }).map((b) => Buffer.from(b).toString('base64'));
const headerValue = fc.oneof(
  oddString,
  hex.map((h) => `sha256=${h}`),
  fc.tuple(fc.constantFrom('v1', 'v2', 'v1a', ''), b64).map(([v, m]) => `${v},${m}`),
  fc
    .array(
      fc.tuple(fc.constantFrom('v1', 'v0'), b64).map(([v, m]) => `${v},${m}`),
      { maxLength: 4 },
    )
    .map((a) => a.join(' ')),
  fc.oneof(fc.integer(), fc.constant(Number.MAX_SAFE_INTEGER), fc.constant(1e21)).map(String),
  fc.constantFrom('', ' ', '0', '0017', ' 1700000000 ', 'NaN', '-1', '1e3', 'sha256=', 'sha256=zz', 'v1,', ',,,'),
);
const headersArb: fc.Arbitrary<WebhookHeaders> = fc.oneof(
  fc.dictionary(
    fc.oneof(fc.constantFrom(...NAMES), oddString),
    fc.oneof(headerValue, fc.array(headerValue, { maxLength: 3 }), fc.constant(undefined)),
    {
      maxKeys: 8,
    },
  ),
  // A Fetch-style Headers: one value per name.
  fc.dictionary(fc.constantFrom(...NAMES), headerValue, { maxKeys: 6 }).map((d) => {
    const m = new Map(Object.entries(d).map(([k, v]) => [k.toLowerCase(), v]));
    return { get: (n: string) => m.get(n.toLowerCase()) ?? null };
  }),
);
const bodyArb = fc.oneof(
  oddString,
  fc.uint8Array({ maxLength: 64 }),
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
);
const secretArb = fc.oneof(
  oddString,
  fc.uint8Array({ minLength: 1, maxLength: 32 }).map((b) => `whsec_${Buffer.from(b).toString('base64')}`),
  fc.array(oddString, { maxLength: 3 }),
  fc.constantFrom('', 'whsec_', 'whsec_!!', 'whsec_AA=A'),
);

/** A Unix time in seconds (now about 2026, and ones far away). */
const tsArb = fc.oneof(fc.integer({ min: 1_600_000_000, max: 1_900_000_000 }), fc.integer({ min: 0, max: 2 ** 40 }));
const bytes = (b: string | Uint8Array): Buffer => (typeof b === 'string' ? Buffer.from(b, 'utf8') : Buffer.from(b));
/** A secret that signs: any non-empty string (taken as UTF-8, as the sender does). */
const acwSecret = oddString.filter((s) => s !== '');
const stdSecret = fc.uint8Array({ minLength: 1, maxLength: 48 }).map((b) => `whsec_${Buffer.from(b).toString('base64')}`);
/** Event ids as the sender makes them (UUIDs, msg_ tokens): no '.' (see the note in the standard scheme's test). */
const idArb = fc.oneof(fc.uuid(), fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/));
/** Bodies the sender signs: text (its UTF-8 bytes are sent). */
const signedBody = fc.oneof(oddString, fc.json());

describe(`fuzzing verifyWebhook (seed ${SEED}, ${RUNS} cases per property)`, () => {
  it('answers true or false for any headers, body, secret and time; never throws', () => {
    fc.assert(
      fc.property(
        secretArb,
        headersArb,
        bodyArb,
        fc.oneof(fc.integer(), fc.date({ noInvalidDate: true })),
        fc.nat(10_000),
        (secret, headers, body, now, tol) => {
          const ok = verifyWebhook({ secret, headers, body, now, toleranceSeconds: tol });
          expect(typeof ok).toBe('boolean');
          const d = verifyWebhookDetailed({ secret, headers, body, now, toleranceSeconds: tol });
          expect(d.ok).toBe(ok);
        },
      ),
      params('any'),
    );
  });

  it('acw: accepts what was signed, and no other body or timestamp', () => {
    fc.assert(
      fc.property(acwSecret, tsArb, tsArb, signedBody, bodyArb, idArb, (secret, ts, otherTs, body, otherBody, id) => {
        const sig = signAcw(secret, ts, body);
        const check = (t: string, b: string | Uint8Array, extra: Record<string, string> = {}) =>
          verifyWebhook({
            secret,
            headers: { 'x-acw-signature': sig, 'x-acw-timestamp': t, 'x-acw-event-id': id, ...extra },
            body: b,
            now: ts * 1000,
            // The window is not what is tested here: wide enough for any other timestamp.
            toleranceSeconds: 2 ** 41,
          });
        expect(check(String(ts), body)).toBe(true);
        expect(
          verifyWebhook({
            secret: [`${secret}x`, secret],
            headers: { 'x-acw-signature': sig, 'x-acw-timestamp': String(ts), 'x-acw-event-id': id },
            body,
            now: ts * 1000,
          }),
        ).toBe(true);
        expect(check(String(ts), otherBody)).toBe(bytes(otherBody).equals(bytes(body)));
        expect(check(String(otherTs), body)).toBe(otherTs === ts);
        // The right signature moved to -Next, a wrong one in front: still only for this body and time.
        expect(check(String(ts), body, { 'x-acw-signature': `sha256=${'0'.repeat(64)}`, 'x-acw-signature-next': sig })).toBe(true);
        expect(check(String(otherTs), body, { 'x-acw-signature-next': sig })).toBe(otherTs === ts);
      }),
      params('acw'),
    );
  });

  it('standard: accepts what was signed, and no other body or timestamp', () => {
    // Ids are taken without '.': the scheme signs `<id>.<ts>.<body>`, so an id with ".<digits>." in it
    // could be split differently; senders make UUIDs (this service) or msg_ tokens, never such ids.
    fc.assert(
      fc.property(stdSecret, tsArb, tsArb, signedBody, bodyArb, idArb, idArb, (secret, ts, otherTs, body, otherBody, id, otherId) => {
        const sig = signStandard(secret, id, ts, body);
        const check = (t: string, b: string | Uint8Array, i = id) =>
          verifyWebhook({
            secret,
            headers: { 'webhook-signature': `v1a,AAAA ${sig}`, 'webhook-timestamp': t, 'webhook-id': i },
            body: b,
            now: ts * 1000,
            toleranceSeconds: 2 ** 41,
          });
        expect(check(String(ts), body)).toBe(true);
        expect(check(String(ts), otherBody)).toBe(bytes(otherBody).equals(bytes(body)));
        expect(check(String(otherTs), body)).toBe(otherTs === ts);
        expect(check(String(ts), body, otherId)).toBe(otherId === id);
      }),
      params('standard'),
    );
  });
});
