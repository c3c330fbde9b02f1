import { types } from 'node:util';

/**
 * The JSON text of an event's data as it comes back from event_log.data, a jsonb column, through
 * node-postgres: `JSON.stringify` of what `JSON.parse` makes of PostgreSQL's jsonb output. A body
 * built in memory from this text is byte for byte the body built later from the stored event.
 *
 * Two things reorder an object's keys on that way, and nothing else changes:
 * - jsonb keeps an object's keys sorted, shorter first by byte length, then bytewise (its
 *   lengthCompareJsonbString); a repeated key keeps its last value, as JSON.parse already did here.
 *   The bytes are UTF-8 in a UTF8 database (the embedded one is created so); in a database of
 *   another encoding, non-ASCII keys would sort by that encoding's bytes instead.
 * - JSON.parse then builds an ordinary object, whose own keys list array indices ("0" to
 *   "4294967294") first, in numeric order, and the other keys in the order they came.
 *
 * Numbers come back as they went: JSON.stringify writes the shortest decimal that reads back as the
 * same double, jsonb keeps that decimal exactly (numeric, only its notation changes: 1e+21 comes
 * back as 1000000000000000000000, 5e-324 as 0.000…005), and JSON.parse rounds it to the same double.
 * -0 was already written 0. Strings come back as they went (no NUL, no lone surrogate: eventData
 * refuses those, as jsonb does), so JSON.stringify escapes them alike.
 * So for a value from JSON.parse this is JSON.stringify's text with members reordered: as long.
 *
 * test/webhook/jsonb-text.test.ts holds this equal to the round trip through real PostgreSQL.
 */
export function jsonbText(value: unknown): string {
  // undefined (or anything else that serialises to nothing) at the top is null, as dataJson has it.
  return serialize('', value) ?? 'null';
}

/** JSON.stringify's SerializeJSONProperty for one value, each object's keys in jsonb-then-JS order. */
function serialize(key: string, value: unknown): string | undefined {
  let v = value;
  if ((typeof v === 'object' && v !== null) || typeof v === 'function' || typeof v === 'bigint') {
    const toJSON = (v as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') v = toJSON.call(v, key) as unknown;
  }
  switch (typeof v) {
    case 'string':
    case 'number':
    case 'boolean':
      return JSON.stringify(v);
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
  }
  if (v === null) return 'null';
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i > 0 ? ',' : '') + (serialize(String(i), v[i]) ?? 'null');
    return out + ']';
  }
  // JSON.stringify writes a boxed primitive as its value (none comes from JSON.parse).
  if (types.isBoxedPrimitive(v)) return JSON.stringify(v);
  const obj = v as Record<string, unknown>;
  let out = '{';
  let first = true;
  for (const k of jsonbKeys(obj)) {
    const s = serialize(k, obj[k]);
    if (s === undefined) continue;
    out += (first ? '' : ',') + JSON.stringify(k) + ':' + s;
    first = false;
  }
  return out + '}';
}

/** An array index ("0" to "4294967294"): such keys come first, in numeric order, in any object's own keys. */
function isArrayIndex(k: string): boolean {
  const c = k.charCodeAt(0);
  if (!(c >= 48 && c <= 57)) return false; // not a digit, or the empty key
  const n = Number(k);
  return Number.isInteger(n) && n < 4294967295 && String(n) === k;
}

/**
 * An object's own keys in the order the round trip gives them: its array indices first (own keys
 * list them so already), then the rest sorted as jsonb sorts them. An object already in that order
 * is only checked, and its Object.keys list returned as it is.
 */
function jsonbKeys(v: object): string[] {
  const keys = Object.keys(v);
  let p = 0;
  while (p < keys.length && isArrayIndex(keys[p]!)) p++;
  let sorted = true;
  for (let i = p + 1; i < keys.length; i++) {
    if (compareJsonbKeys(keys[i - 1]!, keys[i]!) > 0) {
      sorted = false;
      break;
    }
  }
  if (sorted) return keys;
  if (p === 0) return keys.toSorted(compareJsonbKeys);
  return [...keys.slice(0, p), ...keys.slice(p).toSorted(compareJsonbKeys)];
}

/** jsonb's order of two keys: UTF-8 byte length, then the UTF-8 bytes (that is, code point order). */
function compareJsonbKeys(a: string, b: string): number {
  const la = utf8Length(a);
  const lb = utf8Length(b);
  if (la !== lb) return la - lb;
  // Equal byte lengths: neither is a prefix of the other unless both are the same, so the first
  // differing UTF-16 unit decides. Units compare as code points do but for surrogates (U+10000 and
  // up), which must sort after U+E000 to U+FFFF: move them above that range first.
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x += x < 0xe000 ? 0x2000 : -0x800;
      y += y < 0xe000 ? 0x2000 : -0x800;
    }
    return x - y;
  }
  return 0;
}

/** A string's length in UTF-8 bytes (its length for ASCII; a surrogate pair is 4 bytes, 2 a unit). */
function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    n += c < 0x800 || (c >= 0xd800 && c < 0xe000) ? 1 : 2;
  }
  return n;
}
