// Hostile input for the fuzz tests (issue 18): JSON generated as text, so it can carry what
// JSON.stringify never writes (1e400, -0, escaped lone surrogates and NULs, duplicate keys).
import fc from 'fast-check';

/** The seed of this run: fixed, so CI is reproducible; FUZZ_SEED picks another for a deep local run. */
export const SEED = Number(process.env['FUZZ_SEED'] ?? 18_0018);
/** Cases per target: 2,000 in CI; FUZZ_RUNS raises it locally. */
export const RUNS = Number(process.env['FUZZ_RUNS'] ?? 2000);

/** The same cases for the same seed and target: each target its own stream, so adding one shifts no other. */
export function cases<T>(target: string, arb: fc.Arbitrary<T>, runs = RUNS): T[] {
  let h = SEED;
  for (const c of target) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return fc.sample(arb, { seed: h, numRuns: runs });
}

/** Characters that break naive code: NUL, lone surrogates, BOM, RTL override, line separators, emoji, combining marks. */
const ODD = [
  '\u0000',
  '\ud800',
  '\udfff',
  '\ufeff',
  '\u202e',
  '\u2028',
  '\u0085',
  '\u{1f4a9}',
  'e\u0301',
  '\u00a0',
  '\t',
  '\n',
  '"',
  '\\',
  '%',
  '$',
];

/** Short strings with odd Unicode mixed in. */
export const oddString: fc.Arbitrary<string> = fc
  .array(
    fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 6 }) }, fc.constantFrom(...ODD), fc.string({ unit: 'binary', maxLength: 3 })),
    {
      maxLength: 6,
    },
  )
  .map((parts) => parts.join(''));

/** A string token as JSON text: escaped properly, or with raw escapes JSON.stringify would not write. */
export const stringTok: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: oddString.map((s) => JSON.stringify(s)) },
  fc.constantFrom('"\\u0000"', '"\\ud800"', '"a\\udc00b"', '"\\\\u0000"', '""', '"\\u00e9"'),
);

/** A number token: in range, out of range, or beyond what a double holds. */
export const numberTok: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.constantFrom(
    '0',
    '-1',
    '-0',
    '1e400',
    '-1e400',
    '1e-400',
    '9007199254740993',
    '123456789012345678901234567890',
    '0.5',
    '1E2',
    '2147483648',
  ),
);

/** Any JSON value as text, a few levels deep. */
export const jsonTok: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    stringTok,
    numberTok,
    fc.constantFrom('true', 'false', 'null'),
    fc.array(tie('v'), { maxLength: 4 }).map((a) => `[${a.join(',')}]`),
    fc.array(fc.tuple(stringTok, tie('v')), { maxLength: 4 }).map((es) => `{${es.map(([k, v]) => `${k}:${v}`).join(',')}}`),
  ),
})).v;

/** Nesting far deeper than any limit, as arrays or objects. */
export const deepTok: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom(65, 1000, 100_000), fc.boolean())
  .map(([d, obj]) => (obj ? '{"a":'.repeat(d) + '1' + '}'.repeat(d) : '['.repeat(d) + ']'.repeat(d)));

/** A string over the 256 KiB data limit, or over server.max_body (1mb in the tests). */
export const hugeTok: fc.Arbitrary<string> = fc.constantFrom(270_000, 1_050_000).map((n) => JSON.stringify('x'.repeat(n)));

/** A value for a field: mostly a valid one (from `good`), sometimes a plausible mistake (`bad`), or anything. */
export function field(good: string[], bad: string[] = []): fc.Arbitrary<string> {
  return rawField(
    good.map((g) => JSON.stringify(g)),
    bad.map((b) => JSON.stringify(b)),
  );
}

/** A field given as raw JSON text tokens (numbers, booleans, objects). */
export function rawField(good: string[], bad: string[] = []): fc.Arbitrary<string> {
  // Mostly valid, so a case often gets past its other fields to the hostile one.
  return fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom(...good) },
    ...(bad.length > 0 ? [{ weight: 2, arbitrary: fc.constantFrom(...bad) }] : []),
    { weight: 3, arbitrary: jsonTok },
    // Rare: they cost the most time per case, and one in a few hundred finds the limits.
    { weight: 1, arbitrary: fc.oneof({ weight: 4, arbitrary: fc.constant('[]') }, deepTok, hugeTok) },
  );
}

/** Present in about one case in six (fc.option's `freq` is the other way round: how rarely it is absent). */
const rarely = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

const UNKNOWN_KEYS = ['__proto__', 'constructor', 'prototype', 'extra', 'idempotencyKey', 'Topic', '', '\u0000', 'data '];

/**
 * A JSON object as text: each known field present or not, sometimes an unknown field or a key twice.
 * `required` fields are there more often, so many cases get past the first check.
 */
export function objectTok(fields: Record<string, fc.Arbitrary<string>>, required: string[] = []): fc.Arbitrary<string> {
  const entries = Object.entries(fields).map(([k, arb]) =>
    fc.oneof(
      { weight: required.includes(k) ? 1 : 2, arbitrary: fc.constant(undefined) },
      { weight: required.includes(k) ? 12 : 1, arbitrary: arb.map((v) => `${JSON.stringify(k)}:${v}`) },
    ),
  );
  const extra = rarely(
    fc
      .tuple(fc.oneof(fc.constantFrom(...UNKNOWN_KEYS, ...Object.keys(fields)), oddString), jsonTok)
      .map(([k, v]) => `${JSON.stringify(k)}:${v}`),
  );
  return fc.tuple(fc.tuple(...entries), extra).map(([es, x]) => `{${[...es, x].filter((e) => e !== undefined).join(',')}}`);
}

export interface BodyCase {
  /** Bytes sent; undefined: no body at all. */
  body: Buffer | undefined;
  /** undefined: no content-type header. */
  contentType: string | undefined;
}

const CONTENT_TYPES = [
  'application/json; charset=utf-8',
  'application/JSON',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/jsonx',
  ';;',
];

const json = (text: string): BodyCase => ({ body: Buffer.from(text, 'utf8'), contentType: 'application/json' });

/** A request body: mostly the object, sometimes any JSON, truncated, with the wrong content type, invalid UTF-8, or none. */
export function bodyCase(obj: fc.Arbitrary<string>): fc.Arbitrary<BodyCase> {
  return fc.oneof(
    { weight: 30, arbitrary: obj.map(json) },
    { weight: 3, arbitrary: jsonTok.map(json) },
    { weight: 2, arbitrary: fc.tuple(obj, fc.nat()).map(([t, n]) => json(t.slice(0, t.length > 1 ? n % (t.length - 1) : 0))) },
    {
      weight: 2,
      arbitrary: fc.tuple(obj, fc.constantFrom(...CONTENT_TYPES)).map(([t, ct]) => ({ body: Buffer.from(t), contentType: ct })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(obj, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([t, junk]) => ({
        body: Buffer.concat([Buffer.from(t.slice(0, -1)), Buffer.from([0xff, 0xc3]), Buffer.from(junk), Buffer.from('}')]),
        contentType: 'application/json',
      })),
    },
    { weight: 1, arbitrary: fc.constantFrom<BodyCase>({ body: undefined, contentType: undefined }, json(''), json('   '), json('null')) },
  );
}

/** Percent-encoding that takes any string (encodeURIComponent throws on a lone surrogate; UTF-8 makes it U+FFFD). */
export function pct(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8'))
    out += /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`;
  return out;
}

/** Only what an HTTP client refuses to send (controls, spaces, non-ASCII) encoded: `%`, `&`, `=`, `[` stay raw. */
const raw = (s: string): string => s.replace(/[^\x21-\x7e]/gu, (c) => pct(c));

/** A path segment: one of `good` (encoded), odd text (encoded), or raw junk (bad percent-encoding). */
export function segment(...good: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...good).map(pct) },
    { weight: 3, arbitrary: oddString.filter((s) => s !== '').map(pct) },
    { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%ff', '%00', '..', '%2e%2e', 'a'.repeat(300), '%ed%a0%80') },
  );
}

/** A query string from known parameters (plausible or hostile values, sometimes repeated) and unknown ones. */
export function queryCase(params: Record<string, string[]>): fc.Arbitrary<string> {
  const value = (good: string[]) =>
    fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom(...good) },
      {
        weight: 3,
        arbitrary: fc.oneof(oddString, fc.integer().map(String), fc.constantFrom('', '1e400', '-1', '0x10', ' 1', '1.5', 'true')),
      },
    );
  const enc = fc.oneof({ weight: 6, arbitrary: fc.constant(true) }, fc.constant(false));
  const pair = (k: fc.Arbitrary<string>, v: fc.Arbitrary<string>) =>
    fc.tuple(k, v, enc).map(([kk, vv, e]) => (e ? `${pct(kk)}=${pct(vv)}` : `${raw(kk)}=${raw(vv)}`));
  const known = Object.entries(params).map(([k, good]) =>
    fc.oneof(
      { weight: 2, arbitrary: fc.constant(undefined) },
      fc
        .tuple(pair(fc.constant(k), value(good)), rarely(pair(fc.constant(k), value(good))))
        .map(([a, b]) => (b === undefined ? a : `${a}&${b}`)),
    ),
  );
  const unknown = rarely(pair(fc.oneof(fc.constantFrom('x', '__proto__', 'limit[]', 'a[b]', '%zz'), oddString), oddString));
  return fc.tuple(fc.tuple(...known), unknown).map(([ks, u]) => {
    const q = [...ks, u].filter((x) => x !== undefined).join('&');
    return q === '' ? '' : `?${q}`;
  });
}
