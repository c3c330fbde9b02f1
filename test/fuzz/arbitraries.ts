// Hostile input for the fuzz tests (issue 18): JSON generated as text, so it can carry what
// JSON.stringify never writes (1e400, -0, escaped lone surrogates and NULs, duplicate keys).
import fc from 'fast-check';

/** The seed of this run: fixed, so CI is reproducible; FUZZ_SEED picks another for a deep local run. */
export const SEED = Number(process.env['FUZZ_SEED'] ?? 18_0018);
/** Cases per target: 1,000 (in CI too); FUZZ_RUNS raises it for a deeper local run, FUZZ_SEED varies it. */
export const RUNS = Number(process.env['FUZZ_RUNS'] ?? 1000);

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
