/**
 * JSON Schema (draft 2020-12) to a TypeScript declaration, for `acw-webhooks topics types`: a
 * `Topics` map from each topic to the type of its data, which the client and `notify(db, …)` take
 * as a type parameter (docs/integrate.md#typed-topics). Loaded by that command only.
 *
 * What it covers: `type` (one or a list), `enum`, `const`, `properties`/`required`,
 * `additionalProperties` (a schema: an index signature), `items`, `prefixItems`, `anyOf`/`oneOf`
 * (a union), `allOf` (an intersection), local `$ref`s into `$defs`/`definitions`. Anything else,
 * or a `$ref` too deep, is `unknown`. Objects are closed unless `additionalProperties` says
 * otherwise: a misspelt field is a compile error rather than an extra field.
 */

type Schema = Record<string, unknown> | boolean;

export interface TypedTopic {
  name: string;
  description: string;
  version: number;
  schema: Record<string, unknown>;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (k: string): string => (IDENT.test(k) ? k : JSON.stringify(k));
const lit = (v: unknown): string => (v === null ? 'null' : JSON.stringify(v));
const comment = (text: unknown, pad: string): string =>
  typeof text === 'string' && text.trim() !== '' ? `${pad}/** ${text.replaceAll('*/', '*\\/').replace(/\s*\n\s*/g, ' ')} */\n` : '';

class Generator {
  constructor(private readonly root: Record<string, unknown>) {}

  private resolve(ref: string): Schema | undefined {
    if (!ref.startsWith('#/')) return undefined;
    let node: unknown = this.root;
    for (const part of ref.slice(2).split('/')) {
      const k = part.replaceAll('~1', '/').replaceAll('~0', '~');
      if (typeof node !== 'object' || node === null) return undefined;
      node = (node as Record<string, unknown>)[k];
    }
    return typeof node === 'object' || typeof node === 'boolean' ? (node as Schema) : undefined;
  }

  type(s: Schema | undefined, depth: number, pad: string): string {
    if (s === undefined || s === true) return 'unknown';
    if (s === false) return 'never';
    if (depth > 20) return 'unknown';
    if (typeof s['$ref'] === 'string') return this.type(this.resolve(s['$ref']), depth + 1, pad);
    if ('const' in s) return lit(s['const']);
    if (Array.isArray(s['enum'])) return s['enum'].map(lit).join(' | ') || 'never';
    const parts: string[] = [];
    for (const k of ['anyOf', 'oneOf'] as const) {
      const list = s[k];
      if (Array.isArray(list)) parts.push(`(${list.map((x) => this.type(x as Schema, depth + 1, pad)).join(' | ')})`);
    }
    if (Array.isArray(s['allOf'])) parts.push(`(${s['allOf'].map((x) => this.type(x as Schema, depth + 1, pad)).join(' & ')})`);
    const own = this.own(s, depth, pad);
    if (own !== null) parts.unshift(own);
    return parts.length === 0 ? 'unknown' : parts.join(' & ');
  }

  /** The schema's own `type` (with properties or items), or null when it has none. */
  private own(s: Record<string, unknown>, depth: number, pad: string): string | null {
    let types = Array.isArray(s['type']) ? (s['type'] as string[]) : typeof s['type'] === 'string' ? [s['type']] : [];
    if (types.length === 0) {
      if (s['properties'] !== undefined || s['additionalProperties'] !== undefined) types = ['object'];
      else if (s['items'] !== undefined || s['prefixItems'] !== undefined) types = ['array'];
      else return null;
    }
    const out = types.map((t) => {
      switch (t) {
        case 'string':
          return 'string';
        case 'number':
        case 'integer':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'null':
          return 'null';
        case 'array':
          return this.array(s, depth, pad);
        case 'object':
          return this.object(s, depth, pad);
        default:
          return 'unknown';
      }
    });
    return out.length === 1 ? out[0]! : `(${out.join(' | ')})`;
  }

  private array(s: Record<string, unknown>, depth: number, pad: string): string {
    if (Array.isArray(s['prefixItems'])) {
      const head = s['prefixItems'].map((x) => this.type(x as Schema, depth + 1, pad));
      const rest = s['items'] === false ? [] : [`...${this.wrap(this.type(s['items'] as Schema | undefined, depth + 1, pad))}[]`];
      return `[${[...head, ...rest].join(', ')}]`;
    }
    return `${this.wrap(this.type(s['items'] as Schema | undefined, depth + 1, pad))}[]`;
  }

  private wrap(t: string): string {
    return /^[\w.]+$/.test(t) ? t : `(${t})`;
  }

  private object(s: Record<string, unknown>, depth: number, pad: string): string {
    const props = (typeof s['properties'] === 'object' && s['properties'] !== null ? s['properties'] : {}) as Record<string, Schema>;
    const required = new Set(Array.isArray(s['required']) ? (s['required'] as string[]) : []);
    const inner = `${pad}  `;
    const lines = Object.entries(props).map(([k, p]) => {
      const doc = typeof p === 'object' ? comment(p['description'], inner) : '';
      return `${doc}${inner}${key(k)}${required.has(k) ? '' : '?'}: ${this.type(p, depth + 1, inner)};\n`;
    });
    const extra = s['additionalProperties'];
    if (typeof extra === 'object' && extra !== null)
      lines.push(`${inner}[key: string]: ${this.type(extra as Schema, depth + 1, inner)};\n`);
    else if (extra === true) lines.push(`${inner}[key: string]: unknown;\n`);
    // Required names without a property schema are still there, of any type.
    for (const r of required) if (!(r in props)) lines.push(`${inner}${key(r)}: unknown;\n`);
    return lines.length === 0 ? 'Record<string, never>' : `{\n${lines.join('')}${pad}}`;
  }
}

/** The declaration file's text: one `Topics` interface, each topic's data type under its name. */
export function topicsDeclaration(topics: readonly TypedTopic[]): string {
  const entries = topics
    .toSorted((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((t) => {
      const doc = comment(`${t.description ? `${t.description} ` : ''}(schema version ${t.version})`, '  ');
      return `${doc}  ${JSON.stringify(t.name)}: ${new Generator(t.schema).type(t.schema, 0, '  ')};\n`;
    });
  return (
    '// Generated by `acw-webhooks topics types` from the topic catalog: run it again after a schema changes.\n' +
    '// Use it as the type parameter of createClient<Topics>() and notify<Topics>().\n' +
    `export interface Topics {\n${entries.join('')}}\n`
  );
}
