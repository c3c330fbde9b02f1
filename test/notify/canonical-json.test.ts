import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/notify/canonical-json.js';

/** The definition the stored request hashes were made with: canonicalJson must give the same bytes. */
function reference(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).toSorted(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = [
  'a',
  'b',
  'B',
  'z',
  '',
  '0',
  '1',
  '2',
  '9',
  '10',
  '01',
  '-1',
  '1.5',
  '1e3',
  '4294967294',
  '4294967295',
  'é',
  '\u{1f600}',
  'a"b',
  '__proto_',
];
const STRINGS = ['', 'x', 'quote " and \\ backslash', 'line\nbreak', 'ünïcödé', '\u{1f600}', '\u2028', '\ud800'];
const NUMBERS = [0, -0, 1, -1, 1.5, 1e21, 1e-7, 2 ** 53, Number.NaN, Infinity, 1999];

function gen(r: () => number, depth: number): unknown {
  const k = r();
  if (depth <= 0 || k < 0.4) {
    const p = r();
    if (p < 0.3) return STRINGS[Math.floor(r() * STRINGS.length)];
    if (p < 0.6) return NUMBERS[Math.floor(r() * NUMBERS.length)];
    if (p < 0.75) return r() < 0.5;
    if (p < 0.9) return null;
    return undefined;
  }
  if (k < 0.65) return Array.from({ length: Math.floor(r() * 5) }, () => gen(r, depth - 1));
  const o: Record<string, unknown> = {};
  const n = Math.floor(r() * 7);
  for (let i = 0; i < n; i++) o[KEYS[Math.floor(r() * KEYS.length)]!] = gen(r, depth - 1);
  return o;
}

describe('canonicalJson', () => {
  it('sorts keys at any depth and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, 1], c: null } })).toBe('{"a":{"c":null,"d":[3,1]},"b":1}');
  });

  it.each([
    ['index keys first, in numeric order', { b: 1, 10: 2, 9: 3, a: 4, '01': 5 }],
    ['keys already in order', { a: 1, b: { c: 2, d: 3 } }],
    ['a Date (toJSON)', { at: new Date(0), list: [new Date(1)] }],
    ['a toJSON given its key', { k: { toJSON: (key: string) => ({ key, z: 1, y: 2 }) } }],
    ['a toJSON returning an object with a toJSON', { k: { toJSON: () => ({ toJSON: () => 'no', b: 1, a: 2 }) } }],
    ['boxed primitives', [Object('ab'), Object(1), Object(true)]],
    ['undefined, functions and symbols', { u: undefined, f: () => 1, s: Symbol('x'), list: [undefined, () => 1, Symbol('y')] }],
    ['non-finite numbers and negative zero', [Number.NaN, Infinity, -Infinity, -0]],
    ['sparse arrays', [1, , 3]], // eslint-disable-line no-sparse-arrays
    ['top-level primitives', 'x'],
    ['a Map and a Set', { m: new Map([['a', 1]]), s: new Set([1]) }],
  ])('gives the bytes the replacer gave: %s', (_name, value) => {
    expect(canonicalJson(value)).toBe(reference(value));
  });

  it('gives the bytes the replacer gave for 5,000 generated values', () => {
    const r = rng(14);
    for (let i = 0; i < 5_000; i++) {
      const v = [gen(r, 4), gen(r, 4), []];
      expect(canonicalJson(v)).toBe(reference(v));
    }
  });

  it('throws on a bigint, as JSON.stringify does', () => {
    expect(() => canonicalJson({ n: 1n })).toThrow(TypeError);
  });
});
