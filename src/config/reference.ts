/**
 * Every config key as a markdown table, generated from the zod schema's own `.describe()` texts and
 * defaults: docs/operations.md#configuration-keys is this output (scripts/docs.mjs writes it, a
 * test fails when the committed text drifts).
 */
import { z } from 'zod';
import { configSchema } from './schema.js';

type Json = Record<string, unknown>;

function toJson(io: 'input' | 'output'): Json {
  return z.toJSONSchema(configSchema, { io, unrepresentable: 'any' }) as Json;
}

function typeOf(s: Json): string {
  if (Array.isArray(s.enum)) return (s.enum as unknown[]).map((v) => `\`${String(v)}\``).join(' \\| ');
  switch (s.type) {
    case 'boolean':
      return 'boolean';
    case 'integer':
      return `integer ${String(s.minimum)}..${String(s.maximum)}`;
    case 'number':
      return s.minimum !== undefined && s.maximum !== undefined ? `number ${String(s.minimum)}..${String(s.maximum)}` : 'number';
    case 'array':
      return (s.items as Json | undefined)?.type === 'object' ? 'list of objects' : 'list of strings';
    case 'object':
      return 'map of strings';
    default:
      // Durations, sizes, rates, URLs and times are strings in YAML; the description says which.
      return 'string';
  }
}

function shown(value: unknown): string {
  if (value === undefined) return '';
  if (value === '') return '`""`';
  return `\`${JSON.stringify(value).replace(/\|/g, '\\|')}\``;
}

/** Rows of `key | type | default | meaning` for every leaf key, depth first in schema order. */
function rows(input: Json, output: Json | undefined, path: string, out: string[]): void {
  const props = (input.properties ?? {}) as Record<string, Json>;
  const outProps = (output?.properties ?? {}) as Record<string, Json>;
  for (const [name, s] of Object.entries(props)) {
    const key = path === '' ? name : `${path}.${name}`;
    const o = outProps[name];
    if (s.type === 'object' && s.properties) {
      rows(s, o, key, out);
      continue;
    }
    const items = s.items as Json | undefined;
    const def = s.default !== undefined ? s.default : o?.default;
    // Markdown would read `<base64>` as a tag and `"*"` as emphasis.
    const desc = String(s.description ?? '')
      .replace(/[|*]/g, '\\$&')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;');
    out.push(`| \`${key}\` | ${typeOf(s)} | ${shown(def)} | ${desc} |`);
    if (s.type === 'array' && items?.type === 'object') rows(items, o?.items as Json | undefined, `${key}[]`, out);
  }
}

export function configReference(): string {
  const out = ['| key | type | default | meaning |', '| --- | --- | --- | --- |'];
  rows(toJson('input'), toJson('output'), '', out);
  return `${out.join('\n')}\n`;
}
