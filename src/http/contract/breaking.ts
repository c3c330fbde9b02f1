/**
 * The changes between two versions of the OpenAPI document that can break a client built on the
 * older one: an operation, a status or an answer's field removed (or made optional), a request made
 * stricter (a field, parameter or value it accepted now refused, a new required one), an answer
 * made looser (a type or value it could not have before, such as null). `npm run docs` refuses to
 * write such a document over docs/openapi.json without `--accept-breaking`, and
 * test/http/openapi.test.ts fails while the committed snapshot and the code disagree that way:
 * each break is a decision visible in the commit that makes it. Additions are never breaking.
 */
import type { Json } from './json-schema.js';

type Dir = 'request' | 'answer';
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `node` with `$ref`s into the same document followed (the document has no cycles). */
function resolve(doc: Json, node: unknown, depth = 0): Json {
  if (!isObject(node)) return {};
  if (typeof node.$ref !== 'string' || depth > 20) return node;
  let cur: unknown = doc;
  for (const part of node.$ref.replace(/^#\//, '').split('/'))
    cur = isObject(cur) ? cur[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  return resolve(doc, cur, depth + 1);
}

/** The JSON types a schema allows (`{}` for any), anyOf branches together; an integer is a number too. */
function types(s: Json, doc: Json): Set<string> | null {
  if (Array.isArray(s.anyOf) || Array.isArray(s.oneOf)) {
    const out = new Set<string>();
    for (const b of (s.anyOf ?? s.oneOf) as unknown[]) {
      const t = types(resolve(doc, b), doc);
      if (t === null) return null;
      for (const x of t) out.add(x);
    }
    return out;
  }
  if (s.type === undefined) return null;
  return new Set(Array.isArray(s.type) ? (s.type as string[]) : [s.type as string]);
}

const covers = (wide: Set<string>, t: string): boolean => wide.has(t) || (t === 'integer' && wide.has('number'));
const values = (s: Json): unknown[] | null => (Array.isArray(s.enum) ? (s.enum as unknown[]) : s.const !== undefined ? [s.const] : null);
const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
const shown = (t: Set<string> | null): string => (t ? [...t].join('|') : 'any');
const paramKey = (p: Json): string => `${String(p.in)} ${String(p.name).toLowerCase()}`;

/**
 * What in `after` breaks a client of `before`. A request schema must accept everything it accepted;
 * an answer's must promise everything it promised and nothing it did not.
 */
function compareSchema(doc: [Json, Json], a: Json, b: Json, dir: Dir, at: string, out: string[]): void {
  const [before, after] = [resolve(doc[0], a), resolve(doc[1], b)];
  const [tb, ta] = [types(before, doc[0]), types(after, doc[1])];
  // A request's schema may only widen, an answer's only narrow: `wide` must cover all of `narrow`.
  const [wide, narrow] = dir === 'request' ? [ta, tb] : [tb, ta];
  if (wide !== null && (narrow === null || [...narrow].some((t) => !covers(wide, t))))
    out.push(dir === 'request' ? `${at}: narrowed from ${shown(tb)} to ${shown(ta)}` : `${at}: may now be ${shown(ta)}, was ${shown(tb)}`);
  const [vb, va] = [values(before), values(after)];
  const [vWide, vNarrow] = dir === 'request' ? [va, vb] : [vb, va];
  if (vWide !== null) {
    const extra = vNarrow === null ? null : vNarrow.filter((v) => !vWide.some((w) => same(v, w)));
    if (extra === null)
      out.push(dir === 'request' ? `${at}: now limited to ${JSON.stringify(va)}` : `${at}: no longer limited to ${JSON.stringify(vb)}`);
    else if (extra.length > 0)
      out.push(dir === 'request' ? `${at}: no longer accepts ${JSON.stringify(extra)}` : `${at}: may now be ${JSON.stringify(extra)}`);
  }
  if (dir === 'request') {
    for (const [k, stricter] of [
      ['maxLength', (x: number, y: number) => y < x],
      ['maximum', (x: number, y: number) => y < x],
      ['maxItems', (x: number, y: number) => y < x],
      ['minLength', (x: number, y: number) => y > x],
      ['minimum', (x: number, y: number) => y > x],
      ['minItems', (x: number, y: number) => y > x],
    ] as const) {
      const [x, y] = [before[k], after[k]];
      if (typeof y === 'number' && (typeof x !== 'number' || stricter(x, y))) out.push(`${at}: ${k} now ${y} (was ${String(x ?? 'none')})`);
    }
    if (typeof after.pattern === 'string' && after.pattern !== before.pattern) out.push(`${at}: now must match ${after.pattern}`);
  }
  // Members of an object.
  const [pb, pa] = [(before.properties ?? {}) as Json, (after.properties ?? {}) as Json];
  const [rb, ra] = [new Set((before.required ?? []) as string[]), new Set((after.required ?? []) as string[])];
  for (const [name, sb] of Object.entries(pb)) {
    const path = `${at}.${name}`;
    if (!(name in pa)) {
      if (dir === 'answer' || after.additionalProperties === false) out.push(`${path}: removed`);
      continue;
    }
    if (dir === 'answer' && rb.has(name) && !ra.has(name)) out.push(`${path}: may now be absent`);
    if (dir === 'request' && !rb.has(name) && ra.has(name)) out.push(`${path}: now required`);
    compareSchema(doc, sb as Json, pa[name] as Json, dir, path, out);
  }
  if (dir === 'request') {
    for (const name of ra) if (!(name in pb)) out.push(`${at}.${name}: new and required`);
    if (before.additionalProperties !== false && after.additionalProperties === false && before.type === 'object')
      out.push(`${at}: no longer accepts other members`);
  }
  if (isObject(before.items) && isObject(after.items)) compareSchema(doc, before.items, after.items, dir, `${at}[]`, out);
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const contentSchema = (body: Json): Json => {
  const c = (body.content ?? {}) as Record<string, Json>;
  return (c['application/json']?.schema ?? {}) as Json;
};

/** Compare one operation; `hook`: a webhook, whose request is what we send and whose answers are the receiver's. */
function compareOperation(doc: [Json, Json], ob: Json, oa: Json, where: string, hook: boolean, out: string[]): void {
  if (ob.operationId !== oa.operationId) out.push(`${where}: operationId ${String(ob.operationId)} became ${String(oa.operationId)}`);
  const sent: Dir = hook ? 'answer' : 'request';
  const params = (o: Json): Map<string, Json> =>
    new Map(((o.parameters ?? []) as unknown[]).map((p) => resolve(doc[0], p)).map((p) => [paramKey(p), p]));
  const [pb, pa] = [params(ob), params(oa)];
  for (const [k, p] of pb) {
    const q = pa.get(k);
    if (!q) out.push(`${where}: parameter ${k} removed`);
    else {
      if (!hook && !p.required && q.required) out.push(`${where}: parameter ${k} now required`);
      if (hook && p.required && !q.required) out.push(`${where}: header ${k} may now be absent`);
      compareSchema(doc, (p.schema ?? {}) as Json, (q.schema ?? {}) as Json, sent, `${where} ${k}`, out);
    }
  }
  for (const [k, q] of pa) if (!pb.has(k) && q.required && !hook) out.push(`${where}: parameter ${k} new and required`);
  const [bb, ba] = [resolve(doc[0], ob.requestBody), resolve(doc[1], oa.requestBody)];
  if (!hook && ba.required === true && bb.required !== true) out.push(`${where}: a body is now required`);
  if (Object.keys(bb).length > 0 && Object.keys(ba).length > 0)
    compareSchema(doc, contentSchema(bb), contentSchema(ba), sent, `${where} body`, out);
  const [sb, sa] = [(ob.responses ?? {}) as Json, (oa.responses ?? {}) as Json];
  for (const [status, rb] of Object.entries(sb)) {
    if (!(status in sa)) {
      out.push(`${where}: status ${status} removed`);
      continue;
    }
    const [x, y] = [resolve(doc[0], rb), resolve(doc[1], sa[status])];
    if (x.content && !y.content) out.push(`${where}: status ${status} no longer has a body`);
    if (x.content && y.content)
      compareSchema(doc, contentSchema(x), contentSchema(y), hook ? 'request' : 'answer', `${where} ${status}`, out);
  }
}

/** Every change from `before` to `after` that can break a client (or a receiver) built on `before`. */
export function breakingChanges(before: Json, after: Json): string[] {
  const out: string[] = [];
  const doc: [Json, Json] = [before, after];
  for (const [section, hook] of [
    ['paths', false],
    ['webhooks', true],
  ] as const) {
    const [b, a] = [(before[section] ?? {}) as Record<string, Json>, (after[section] ?? {}) as Record<string, Json>];
    for (const [path, ops] of Object.entries(b)) {
      for (const method of METHODS) {
        const ob = ops[method] as Json | undefined;
        if (!ob) continue;
        const where = `${method.toUpperCase()} ${path}`;
        const oa = a[path]?.[method] as Json | undefined;
        if (!oa) out.push(`${where}: operation ${String(ob.operationId)} removed`);
        else compareOperation(doc, ob, oa, where, hook, out);
      }
    }
  }
  return out;
}
