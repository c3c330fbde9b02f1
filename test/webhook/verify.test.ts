import { describe, expect, it } from 'vitest';
import { verifyWebhook, verifyWebhookDetailed, type VerifyWebhookOptions } from '../../src/verify.js';
import { buildHeaders, signAcw } from '../../src/webhook/sign.js';

const SECRET = 'acw-verify-secret-XYZ-987';
const WHSEC = `whsec_${Buffer.from('standard-key-bytes-for-tests-32b').toString('base64')}`;
const JOB = '3f1e1c2a-8a9b-4c7d-9e0f-112233445566';
const BODY = '{"event_id":"e1","topic":"t.x","occurred_at":"2024-01-01T00:00:00.000Z","data":{"n":"Zoë"}}';
const NOW = 1_700_000_000_000;
const TS = NOW / 1000;

const acw = (over: Partial<{ ts: number; body: string; secret: string }> = {}): Record<string, string> =>
  buildHeaders({
    scheme: 'acw',
    secret: over.secret ?? SECRET,
    jobId: JOB,
    topic: 't.x',
    body: over.body ?? BODY,
    timestamp: over.ts ?? TS,
  });
const std = (over: Partial<{ ts: number; secret: string }> = {}): Record<string, string> =>
  buildHeaders({ scheme: 'standard', secret: over.secret ?? WHSEC, jobId: JOB, topic: 't.x', body: BODY, timestamp: over.ts ?? TS });

function without(h: Record<string, string>, name: string): Record<string, string> {
  return Object.fromEntries(Object.entries(h).filter(([k]) => k.toLowerCase() !== name.toLowerCase()));
}
function lower(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}
function upper(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), v]));
}

type Case = [name: string, opts: Omit<VerifyWebhookOptions, 'now'>, expected: ReturnType<typeof verifyWebhookDetailed>];
const okAcw = { ok: true, scheme: 'acw', timestamp: TS, id: JOB, secretIndex: 0 } as const;
const okStd = { ok: true, scheme: 'standard', timestamp: TS, id: JOB, secretIndex: 0 } as const;
const acwSig = acw()['X-ACW-Signature'] as string;
const stdSig = std()['webhook-signature'] as string;

const cases: Case[] = [
  ['accepts a valid acw delivery', { secret: SECRET, headers: acw(), body: BODY }, okAcw],
  ['accepts a valid standard delivery', { secret: WHSEC, headers: std(), body: BODY }, okStd],
  ['accepts the body as a Buffer', { secret: SECRET, headers: acw(), body: Buffer.from(BODY) }, okAcw],
  ['accepts the body as a Uint8Array', { secret: SECRET, headers: acw(), body: new TextEncoder().encode(BODY) }, okAcw],
  ['accepts lower-case header names (Node req.headers)', { secret: SECRET, headers: lower(acw()), body: BODY }, okAcw],
  ['accepts upper-case header names', { secret: WHSEC, headers: upper(std()), body: BODY }, okStd],
  ['accepts a Fetch Headers instance', { secret: SECRET, headers: new Headers(acw()), body: BODY }, okAcw],
  [
    'accepts string[] header values',
    { secret: SECRET, headers: Object.fromEntries(Object.entries(acw()).map(([k, v]) => [k, [v]])), body: BODY },
    okAcw,
  ],
  [
    'accepts a timestamp exactly at the tolerance',
    { secret: SECRET, headers: acw({ ts: TS - 300 }), body: BODY },
    { ...okAcw, timestamp: TS - 300 },
  ],
  [
    'accepts any matching entry of several standard signatures',
    {
      secret: WHSEC,
      headers: { ...std(), 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')} v2,abc= ${stdSig}` },
      body: BODY,
    },
    okStd,
  ],
  [
    'rejects a stale acw timestamp',
    { secret: SECRET, headers: acw({ ts: TS - 301 }), body: BODY },
    { ok: false, reason: 'timestamp_too_old' },
  ],
  [
    'rejects a stale standard timestamp',
    { secret: WHSEC, headers: std({ ts: TS - 3600 }), body: BODY },
    { ok: false, reason: 'timestamp_too_old' },
  ],
  [
    'rejects a timestamp too far in the future',
    { secret: SECRET, headers: acw({ ts: TS + 301 }), body: BODY },
    { ok: false, reason: 'timestamp_in_future' },
  ],
  [
    'rejects a tampered acw body',
    { secret: SECRET, headers: acw(), body: BODY.replace('Zoë', 'Zoe') },
    { ok: false, reason: 'signature_mismatch' },
  ],
  ['rejects a tampered standard body', { secret: WHSEC, headers: std(), body: `${BODY} ` }, { ok: false, reason: 'signature_mismatch' }],
  ['rejects a wrong acw secret', { secret: `${SECRET}x`, headers: acw(), body: BODY }, { ok: false, reason: 'signature_mismatch' }],
  [
    'rejects a wrong standard secret',
    { secret: `whsec_${Buffer.from('another-key').toString('base64')}`, headers: std(), body: BODY },
    { ok: false, reason: 'signature_mismatch' },
  ],
  [
    'rejects a changed standard webhook-id',
    { secret: WHSEC, headers: { ...std(), 'webhook-id': 'other' }, body: BODY },
    { ok: false, reason: 'signature_mismatch' },
  ],
  [
    'rejects a truncated hex signature as a mismatch',
    { secret: SECRET, headers: { ...acw(), 'X-ACW-Signature': acwSig.slice(0, -2) }, body: BODY },
    { ok: false, reason: 'signature_mismatch' },
  ],
  [
    'rejects a signature without the sha256= prefix',
    { secret: SECRET, headers: { ...acw(), 'X-ACW-Signature': acwSig.slice(7) }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects a non-hex acw signature',
    { secret: SECRET, headers: { ...acw(), 'X-ACW-Signature': `sha256=${'zz'.repeat(32)}` }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects a non-integer timestamp',
    { secret: SECRET, headers: { ...acw(), 'X-ACW-Timestamp': `${TS}.5` }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects a negative timestamp',
    { secret: SECRET, headers: { ...acw(), 'X-ACW-Timestamp': '-1' }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects a standard signature that is not v<n>,<base64>',
    { secret: WHSEC, headers: { ...std(), 'webhook-signature': 'garbage' }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects conflicting repeated signature headers',
    { secret: SECRET, headers: { ...lower(acw()), 'x-acw-signature': [acwSig, signAcw(SECRET, TS, '{}')] }, body: BODY },
    { ok: false, reason: 'malformed_header' },
  ],
  [
    'rejects a request with no signature header',
    { secret: SECRET, headers: without(acw(), 'X-ACW-Signature'), body: BODY },
    { ok: false, reason: 'missing_header' },
  ],
  [
    'rejects an acw request without a timestamp',
    { secret: SECRET, headers: without(acw(), 'x-acw-timestamp'), body: BODY },
    { ok: false, reason: 'missing_header' },
  ],
  [
    'rejects an acw request without an event id',
    { secret: SECRET, headers: without(acw(), 'X-ACW-Event-Id'), body: BODY },
    { ok: false, reason: 'missing_header' },
  ],
  [
    'rejects a standard request without webhook-id',
    { secret: WHSEC, headers: without(std(), 'webhook-id'), body: BODY },
    { ok: false, reason: 'missing_header' },
  ],
  ['rejects an empty headers object', { secret: SECRET, headers: {}, body: BODY }, { ok: false, reason: 'missing_header' }],
  [
    'rejects a standard delivery checked with a non-whsec secret',
    { secret: SECRET, headers: std(), body: BODY },
    { ok: false, reason: 'bad_secret' },
  ],
  ['rejects an empty acw secret', { secret: '', headers: acw(), body: BODY }, { ok: false, reason: 'bad_secret' }],
];

describe('verifyWebhookDetailed', () => {
  it.each(cases)('%s', (_name, opts, expected) => {
    const result = verifyWebhookDetailed({ ...opts, now: NOW });
    expect(result).toEqual(expected);
    expect(verifyWebhook({ ...opts, now: NOW })).toBe(expected.ok);
  });

  it('never returns a secret or a signature', () => {
    for (const [, opts] of cases) {
      const text = JSON.stringify(verifyWebhookDetailed({ ...opts, now: NOW }));
      for (const needle of [SECRET, WHSEC, WHSEC.slice(6), acwSig, acwSig.slice(7), stdSig, stdSig.slice(3)]) {
        expect(text).not.toContain(needle);
      }
    }
  });

  it('honours a custom tolerance and a Date for now', () => {
    const opts = { secret: SECRET, headers: acw({ ts: TS - 30 }), body: BODY };
    expect(verifyWebhook({ ...opts, now: new Date(NOW), toleranceSeconds: 60 })).toBe(true);
    expect(verifyWebhookDetailed({ ...opts, now: new Date(NOW), toleranceSeconds: 10 })).toEqual({
      ok: false,
      reason: 'timestamp_too_old',
    });
  });

  it('uses the real clock by default', () => {
    const ts = Math.floor(Date.now() / 1000);
    expect(verifyWebhook({ secret: SECRET, headers: acw({ ts }), body: BODY })).toBe(true);
  });
});
