// Tagged values for the HTTP fuzz (issue 32): each generated value says whether it is valid or
// which rule it breaks, so the fuzz can fail on a 2xx for bad input and on a refusal of good input.
import fc from 'fast-check';
import { deepTok, hugeTok, jsonTok, oddString } from './arbitraries.js';

/**
 * What the fuzz's oracle knows of a generated value: the rules it breaks (none: it is valid), and
 * whether that is decided at all (random JSON may or may not be valid for a field: not decided).
 * A request carrying a broken rule must be refused; one whose every value is decided and valid
 * must not be refused as bad input.
 */
export interface Verdict {
  readonly broken: readonly string[];
  readonly decided: boolean;
}

export const GOOD: Verdict = { broken: [], decided: true };
/** Not decided: anything generated without a rule in mind. */
export const ANY: Verdict = { broken: [], decided: false };
export const breaks = (rule: string): Verdict => ({ broken: [rule], decided: true });

/** Every part's verdict at once: broken if any part is, decided if all are. */
export function join(...parts: Verdict[]): Verdict {
  return { broken: parts.flatMap((p) => p.broken), decided: parts.every((p) => p.decided) };
}

/** The same verdict with each broken rule prefixed by where it is (`topic: `, `events[1].`). */
export const at = (where: string, v: Verdict): Verdict => ({ broken: v.broken.map((b) => `${where}${b}`), decided: v.decided });

export interface Tagged {
  /** JSON text (a field's value, a whole object) or a path segment or query string. */
  readonly text: string;
  readonly verdict: Verdict;
}

const tag =
  (verdict: Verdict) =>
  (text: string): Tagged => ({ text, verdict });

/** Values with their rule: valid ones, mistakes (value -> the rule it breaks), and ones that depend on the machine or the state. */
export interface Values {
  good: readonly string[];
  bad?: Readonly<Record<string, string>>;
  /** Neither: accepted or refused by what is outside the request (the resolver, rows written earlier). */
  maybe?: readonly string[];
}

/**
 * A field's values three ways: anything (mostly valid, some mistakes, random JSON now and then),
 * only valid ones, and only mistakes (null: none known). The last two let an object be made valid
 * throughout, or with exactly one mistake: a guard broken on purpose then lets that case through.
 */
export interface Field {
  readonly any: fc.Arbitrary<Tagged>;
  readonly good: fc.Arbitrary<Tagged>;
  readonly bad: fc.Arbitrary<Tagged> | null;
}

const quote = (xs: readonly string[]) => xs.map((x) => JSON.stringify(x));

/** A value for a field: mostly a valid one, sometimes a plausible mistake, or anything. */
export function field(v: Values): Field {
  return rawField({
    good: quote(v.good),
    bad: Object.fromEntries(Object.entries(v.bad ?? {}).map(([k, rule]) => [JSON.stringify(k), rule])),
    maybe: quote(v.maybe ?? []),
  });
}

/** A field given as raw JSON text tokens (numbers, booleans, objects). */
export function rawField(v: Values): Field {
  const good = fc.constantFrom(...v.good).map(tag(GOOD));
  const entries = Object.entries(v.bad ?? {});
  const bad = entries.length > 0 ? fc.constantFrom(...entries).map(([t, rule]) => ({ text: t, verdict: breaks(rule) })) : null;
  // Mostly valid, so a case often gets past its other fields to the hostile one.
  const any = fc.oneof(
    { weight: 12, arbitrary: good },
    ...(bad ? [{ weight: 2, arbitrary: bad }] : []),
    ...(v.maybe?.length ? [{ weight: 1, arbitrary: fc.constantFrom(...v.maybe).map(tag(ANY)) }] : []),
    { weight: 3, arbitrary: jsonTok.map(tag(ANY)) },
    // Rare: they cost the most time per case, and one in a few hundred finds the limits. No field
    // takes a string of 270 KB (data is limited to 256 KiB of JSON; 1 MB is over the body limit),
    // nor nesting past 64 levels (data's limit; every other field is flat).
    {
      weight: 1,
      arbitrary: fc.oneof(
        { weight: 4, arbitrary: fc.constant('[]').map(tag(v.good.includes('[]') ? GOOD : v.bad?.['[]'] ? breaks(v.bad['[]']) : ANY)) },
        deepTok.map(tag(breaks('nested deeper than 64 levels'))),
        hugeTok.map(tag(breaks('oversized'))),
      ),
    },
  );
  return { any, good, bad };
}

/** Present in about one case in six (fc.option's `freq` is the other way round: how rarely it is absent). */
const rarely = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

/** Keys no route knows (each refused as an unknown field), or keys of the object itself given twice. */
const UNKNOWN_KEYS = ['__proto__', 'constructor', 'prototype', 'extra', 'idempotencyKey', 'Topic', '', '\u0000', 'data '];

export interface ObjectRules {
  /** Fields a valid object has (also present more often, so many cases get past the first check). */
  required?: readonly string[];
  /** At least one field (PATCH: nothing to change is a 400). */
  nonEmpty?: boolean;
  /** Rules between fields, from the raw JSON text of each field present (after duplicates: the last one). */
  relate?: (present: ReadonlyMap<string, string>) => Verdict;
}

type Entry = readonly [string, Tagged];

/**
 * A JSON object as text: each known field present or not, sometimes an unknown field or a key
 * twice; in one case in seven valid throughout, in three with exactly one mistake (a bad value, a
 * required field missing, or an unknown field). The verdict is worked out from what was put in,
 * whichever way it was made.
 */
export function objectTok(fields: Record<string, Field>, rules: ObjectRules = {}): Field {
  const required = rules.required ?? [];
  const names = Object.keys(fields);
  const assemble = (given: readonly Entry[], extra?: Entry): Tagged => {
    const parts = [...given, ...(extra ? [extra] : [])].map(([k, t]) => `${JSON.stringify(k)}:${t.text}`);
    // JSON.parse keeps the last of a key given twice: the extra one decides that field.
    const final = new Map<string, Tagged>(given);
    const verdicts: Verdict[] = [];
    if (extra !== undefined) {
      if (names.includes(extra[0])) final.set(extra[0], extra[1]);
      else verdicts.push(breaks('unknown field'));
    }
    for (const [k, t] of final) verdicts.push(at(`${k}: `, t.verdict));
    for (const k of required) if (!final.has(k)) verdicts.push(breaks(`${k}: missing`));
    if (rules.nonEmpty && final.size === 0 && extra === undefined) verdicts.push(breaks('no field given'));
    if (rules.relate) verdicts.push(rules.relate(new Map([...final].map(([k, t]) => [k, t.text]))));
    return { text: `{${parts.join(',')}}`, verdict: join(...verdicts) };
  };

  const entries = names.map((k) =>
    fc.oneof(
      { weight: required.includes(k) ? 1 : 2, arbitrary: fc.constant(undefined) },
      { weight: required.includes(k) ? 12 : 1, arbitrary: fields[k]!.any.map((t): Entry => [k, t]) },
    ),
  );
  const extra = rarely(
    fc
      .tuple(fc.oneof(fc.constantFrom(...UNKNOWN_KEYS, ...names), oddString), jsonTok)
      .map(([k, v]): Entry => [k, { text: v, verdict: ANY }]),
  );
  const normal = fc.tuple(fc.tuple(...entries), extra).map(([es, x]) =>
    assemble(
      es.filter((e) => e !== undefined),
      x,
    ),
  );

  // Valid throughout: required fields and some optional ones, each a valid value (one at least, if it must).
  const present = (k: string) =>
    required.includes(k) ? fc.constant(true) : fc.oneof({ weight: 2, arbitrary: fc.constant(false) }, fc.constant(true));
  const cleanParts = fc.tuple(fc.nat(), fc.tuple(...names.map((k) => fc.tuple(present(k), fields[k]!.good))));
  const pick = (forced: number, ps: ReadonlyArray<readonly [boolean, Tagged]>, skip?: string): Entry[] =>
    names.flatMap((k, i): Entry[] => {
      const [on, t] = ps[i]!;
      return k !== skip && (on || (rules.nonEmpty === true && i === forced % names.length)) ? [[k, t]] : [];
    });
  const good = cleanParts.map(([forced, ps]) => assemble(pick(forced, ps)));

  // Exactly one mistake among valid values.
  type Mistake = { bad: string } | { missing: string } | { unknown: true };
  const mistakes: Mistake[] = [
    ...names.filter((k) => fields[k]!.bad !== null).map((k) => ({ bad: k })),
    ...required.map((k) => ({ missing: k })),
    { unknown: true },
  ];
  const badValues = fc.record(Object.fromEntries(names.flatMap((k) => (fields[k]!.bad ? [[k, fields[k]!.bad!]] : []))));
  const bad = fc
    .tuple(fc.constantFrom(...mistakes), cleanParts, badValues, fc.constantFrom(...UNKNOWN_KEYS))
    .map(([m, [forced, ps], bads, unknownKey]) => {
      if ('unknown' in m) return assemble(pick(forced, ps), [unknownKey, { text: '1', verdict: GOOD }]);
      if ('missing' in m) return assemble(pick(forced, ps, m.missing));
      return assemble([...pick(forced, ps, m.bad), [m.bad, bads[m.bad]!]]);
    });
  return {
    any: fc.oneof({ weight: 3, arbitrary: normal }, { weight: 1, arbitrary: good }, { weight: 3, arbitrary: bad }),
    good,
    bad,
  };
}

/** A JSON array of tagged items as text: each item's rules prefixed by its index. */
export function arrayTok(item: Field, maxLength: number, emptyRule?: string): Field {
  const list = (items: readonly Tagged[]): Tagged => ({
    text: `[${items.map((i) => i.text).join(',')}]`,
    verdict: join(...items.map((t, i) => at(`[${i}].`, t.verdict)), ...(items.length === 0 && emptyRule ? [breaks(emptyRule)] : [])),
  });
  const oneBad = item.bad
    ? fc.tuple(fc.array(item.good, { maxLength: maxLength - 1 }), item.bad, fc.nat()).map(([gs, b, n]) => {
        const i = n % (gs.length + 1);
        return list([...gs.slice(0, i), b, ...gs.slice(i)]);
      })
    : null;
  return {
    any: fc.array(item.any, { maxLength }).map(list),
    good: fc.array(item.good, { minLength: emptyRule ? 1 : 0, maxLength }).map(list),
    bad: oneBad ?? (emptyRule ? fc.constant(list([])) : null),
  };
}

export interface BodyCase {
  /** Bytes sent; undefined: no body at all. */
  body: Buffer | undefined;
  /** undefined: no content-type header. */
  contentType: string | undefined;
  verdict: Verdict;
}

/** Content types other than application/json, each refused with a body (415), and JSON ones a parser may or may not take. */
const CONTENT_TYPES: Readonly<Record<string, string | null>> = {
  'application/json; charset=utf-8': null,
  'application/JSON': null,
  'application/json; charset=latin1': null,
  'text/plain': 'not JSON',
  'application/x-www-form-urlencoded': 'not JSON',
  'multipart/form-data; boundary=x': 'not JSON',
  'application/jsonx': 'not JSON',
  ';;': 'not a content type',
};

const json = (t: Tagged): BodyCase => ({ body: Buffer.from(t.text, 'utf8'), contentType: 'application/json', verdict: t.verdict });

/** A request body: mostly the object, sometimes any JSON, truncated, with the wrong content type, invalid UTF-8, or none. */
export function bodyCase(object: Field): fc.Arbitrary<BodyCase> {
  const obj = object.any;
  const anything = (text: string): BodyCase => ({ ...json({ text, verdict: ANY }) });
  return fc.oneof(
    { weight: 30, arbitrary: obj.map(json) },
    { weight: 3, arbitrary: jsonTok.map(anything) },
    {
      weight: 2,
      // A strict prefix of an object's text is never JSON; an empty one is no body at all.
      arbitrary: fc.tuple(obj, fc.nat()).map(([t, n]) => {
        const text = t.text.slice(0, t.text.length > 1 ? n % (t.text.length - 1) : 0);
        return { ...json({ text, verdict: text === '' ? ANY : breaks('body: truncated JSON') }) };
      }),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(obj, fc.constantFrom(...Object.entries(CONTENT_TYPES))).map(([t, [ct, rule]]) => ({
        body: Buffer.from(t.text),
        contentType: ct,
        verdict: join(t.verdict, rule === null ? ANY : breaks(`content-type: ${rule}`)),
      })),
    },
    {
      weight: 1,
      // Bytes that are not UTF-8 between the last value and the closing brace: never JSON.
      arbitrary: fc.tuple(obj, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([t, junk]) => ({
        body: Buffer.concat([Buffer.from(t.text.slice(0, -1)), Buffer.from([0xff, 0xc3]), Buffer.from(junk), Buffer.from('}')]),
        contentType: 'application/json',
        verdict: breaks('body: invalid UTF-8'),
      })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<BodyCase>(
        { body: undefined, contentType: undefined, verdict: ANY },
        anything(''),
        anything('   '),
        anything('null'),
      ),
    },
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

/** A path segment: one of `good` (encoded), a mistake, odd text (encoded), or raw junk (bad percent-encoding). */
export function segment(v: Values): fc.Arbitrary<Tagged> {
  const bad = Object.entries(v.bad ?? {});
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...v.good).map((g) => ({ text: pct(g), verdict: GOOD })) },
    ...(bad.length > 0
      ? [{ weight: 1, arbitrary: fc.constantFrom(...bad).map(([t, rule]) => ({ text: pct(t), verdict: breaks(rule) })) }]
      : []),
    { weight: 3, arbitrary: oddString.filter((s) => s !== '').map((s) => ({ text: pct(s), verdict: ANY })) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom('%', '%zz', '%ff', '%00', '%ed%a0%80').map(tag(breaks('bad percent-encoding'))),
        fc.constantFrom('..', '%2e%2e').map(tag(ANY)),
        fc.constant('a'.repeat(300)).map(tag(breaks('over 200 characters'))),
      ),
    },
  );
}

/** One `key=value`, percent-encoded or raw. */
const pair = (k: string, [val, verdict]: readonly [string, Verdict], e: boolean): Tagged => ({
  text: e ? `${pct(k)}=${pct(val)}` : `${raw(k)}=${raw(val)}`,
  verdict: at(`?${k}: `, verdict),
});

/** Query keys no route knows, each refused as unknown whichever way it is encoded. */
const UNKNOWN_PARAMS = ['x', '__proto__', 'limit[]', 'a[b]', '%zz'];

/** A query string from known parameters (valid, mistaken or odd values, sometimes repeated) and unknown ones. */
export function queryCase(params: Record<string, Values>): fc.Arbitrary<Tagged> {
  const value = (v: Values): fc.Arbitrary<readonly [string, Verdict]> => {
    const bad = Object.entries(v.bad ?? {});
    return fc.oneof(
      ...(v.good.length > 0 ? [{ weight: 12, arbitrary: fc.constantFrom(...v.good).map((g) => [g, GOOD] as const) }] : []),
      ...(bad.length > 0 ? [{ weight: 2, arbitrary: fc.constantFrom(...bad).map(([b, rule]) => [b, breaks(rule)] as const) }] : []),
      {
        weight: 3,
        arbitrary: fc
          .oneof(oddString, fc.integer().map(String), fc.constantFrom('', '1e400', '-1', '0x10', ' 1', '1.5', 'true'))
          .map((s) => [s, ANY] as const),
      },
    );
  };
  const enc = fc.oneof({ weight: 6, arbitrary: fc.constant(true) }, fc.constant(false));
  const known = Object.entries(params).map(([k, v]) =>
    fc.oneof(
      { weight: 2, arbitrary: fc.constant(undefined) },
      fc.tuple(value(v), enc, rarely(fc.tuple(value(v), enc))).map(([a, e1, b]): Tagged => {
        const first = pair(k, a, e1);
        if (b === undefined) return first;
        // Given twice: an array where the schema may want one value.
        const second = pair(k, b[0], b[1]);
        return { text: `${first.text}&${second.text}`, verdict: join(first.verdict, second.verdict, ANY) };
      }),
    ),
  );
  const unknown = rarely(
    fc.oneof(
      fc.tuple(fc.constantFrom(...UNKNOWN_PARAMS), oddString, enc).map(([k, v, e]) => ({
        text: e ? `${pct(k)}=${pct(v)}` : `${raw(k)}=${raw(v)}`,
        verdict: breaks('unknown parameter'),
      })),
      // Odd keys may split or decode into anything: the request itself is checked for unknown keys.
      fc.tuple(oddString, oddString, enc).map(([k, v, e]) => ({ text: e ? `${pct(k)}=${pct(v)}` : `${raw(k)}=${raw(v)}`, verdict: ANY })),
    ),
  );
  return fc.tuple(fc.tuple(...known), unknown).map(([ks, u]) => {
    const given = [...ks, u].filter((x) => x !== undefined);
    const q = given.map((g) => g.text).join('&');
    return { text: q === '' ? '' : `?${q}`, verdict: join(...given.map((g) => g.verdict)) };
  });
}
