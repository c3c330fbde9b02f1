// No imports: the testing client (src/testing.ts) can hash a request the way the service does.

/**
 * JSON with every object's keys sorted, at any depth: the same data sent with its keys in another
 * order is the same request. Arrays keep their order (it is part of the data).
 *
 * The output is stored (events.request_hash) and compared with later requests, so it must never
 * change: it is, byte for byte, what `JSON.stringify` with a sorting replacer made before
 * (test/notify/canonical-json.test.ts holds the two equal). That replacer rebuilt every object with
 * `Object.fromEntries`, whose own key order puts array-index keys ("0", "10") first in numeric
 * order; the walk below keeps that order and allocates no entries (it was 6% of a batch's CPU).
 */
export function canonicalJson(value: unknown): string {
  return serialize('', value) as string;
}

/** JSON.stringify's SerializeJSONProperty for one value, with the sorting replacer folded in. */
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
  // Any other object, boxed primitives included, went through the replacer as its own enumerable keys.
  const obj = v as Record<string, unknown>;
  let out = '{';
  let first = true;
  for (const k of sortedKeys(obj)) {
    const s = serialize(k, obj[k]);
    if (s === undefined) continue;
    out += (first ? '' : ',') + JSON.stringify(k) + ':' + s;
    first = false;
  }
  return out + '}';
}

/** An array index ("0" to "4294967294"): such keys come first, in numeric order, in any object's own keys. */
function isArrayIndex(k: string): boolean {
  const n = Number(k);
  return Number.isInteger(n) && n >= 0 && n < 4294967295 && String(n) === k;
}

/** The key order of `Object.fromEntries(Object.entries(v).toSorted(byKey))`. */
function sortedKeys(v: object): string[] {
  const keys = Object.keys(v);
  let sorted = true;
  for (let i = 1; i < keys.length; i++) {
    if (keys[i - 1]! >= keys[i]!) {
      sorted = false;
      break;
    }
  }
  // Own keys list array indices first, in numeric order; when the whole list is also in string
  // order, the rebuilt object's order is the same list.
  if (sorted) return keys;
  let p = 0;
  while (p < keys.length && isArrayIndex(keys[p]!)) p++;
  return [...keys.slice(0, p), ...keys.slice(p).toSorted()];
}
