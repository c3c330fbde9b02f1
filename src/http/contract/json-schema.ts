import { z } from 'zod';

/** A JSON Schema (or any JSON object) as plain data. */
export type Json = Record<string, unknown>;

const SAFE = Number.MAX_SAFE_INTEGER;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A zod schema as JSON Schema 2020-12 (what OpenAPI 3.1 uses), `input` for what a client sends
 * (before transforms and defaults), `output` for what the server answers. Tidied for people and
 * for fast-json-stringify alike: `anyOf [T, null]` becomes `type: [T, "null"]` (which the
 * serializer writes without trying each branch), zod's safe-integer bounds go, and in answers a
 * `pattern` beside a `format` goes (the format is the promise; zod's patterns are its own checks).
 */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const out = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as Json;
  delete out.$schema;
  return tidy(out, io) as Json;
}

function tidy(node: unknown, io: 'input' | 'output'): unknown {
  if (Array.isArray(node)) return node.map((n) => tidy(n, io));
  if (!isObject(node)) return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = tidy(v, io);
  if (out.minimum === -SAFE) delete out.minimum;
  if (out.maximum === SAFE) delete out.maximum;
  if (io === 'output' && typeof out.format === 'string') delete out.pattern;
  if (out.readOnly === true) delete out.readOnly;
  return nullable(out);
}

/** `{anyOf: [{type: T, …}, {type: "null"}]}` as `{type: [T, "null"], …}`, enum and const widened to null too. */
function nullable(node: Json): Json {
  const any = node.anyOf;
  if (!Array.isArray(any) || any.length !== 2) return node;
  const nul = any.findIndex((s) => isObject(s) && s.type === 'null' && Object.keys(s).length === 1);
  const other = any[1 - nul] as unknown;
  if (nul < 0 || !isObject(other) || typeof other.type !== 'string') return node;
  const { anyOf: _, ...rest } = node;
  const merged: Json = { ...other, ...rest, type: [other.type, 'null'] };
  if (Array.isArray(merged.enum)) merged.enum = [...(merged.enum as unknown[]), null];
  if ('const' in merged) {
    merged.enum = [merged.const, null];
    delete merged.const;
  }
  return merged;
}

/** Deep equality of JSON values (key order ignored). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => k in b && sameJson(a[k], b[k]));
}

/**
 * `node` with every subtree equal to one of `named` replaced by a `$ref` to it (the largest first,
 * from the top), so the document names shared shapes once. `skip` is the name being defined.
 */
export function withRefs(node: unknown, named: Record<string, Json>, prefix: string, skip?: string): unknown {
  if (Array.isArray(node)) return node.map((n) => withRefs(n, named, prefix));
  if (!isObject(node)) return node;
  for (const [name, schema] of Object.entries(named)) {
    if (name !== skip && sameJson(node, schema)) return { $ref: `${prefix}${name}` };
  }
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = withRefs(v, named, prefix);
  return out;
}
