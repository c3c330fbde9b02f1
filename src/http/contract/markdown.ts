/** docs/api.md: the OpenAPI document (document.ts) as markdown, written by `npm run docs`. */
import { openApiDocument } from './document.js';
import { COMMON_ERRORS } from './errors.js';
import type { Json } from './json-schema.js';

const refName = (ref: string): string => ref.slice(ref.lastIndexOf('/') + 1);
const link = (ref: string): string => `[\`${refName(ref)}\`](#${refName(ref).toLowerCase()})`;
const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** One schema in a few words: `string, date-time`, `array of [Job](#job)`, `integer or null`. */
export function schemaText(s: Json): string {
  if (typeof s.$ref === 'string') return link(s.$ref);
  const parts: string[] = [];
  const types = (Array.isArray(s.type) ? s.type : [s.type]).filter((t): t is string => typeof t === 'string');
  if (Array.isArray(s.enum))
    parts.push(
      (s.enum as unknown[])
        .filter((v) => v !== null)
        .map((v) => `\`${String(v)}\``)
        .join(', ') + (s.enum.includes(null) ? ' or null' : ''),
    );
  else if (s.const !== undefined) parts.push(`\`${String(s.const)}\``);
  else if (types[0] === 'array') parts.push(`array of ${schemaText((s.items ?? {}) as Json) || 'any JSON'}`);
  else if (types.length > 0) parts.push(types.join(' or '));
  else if (Array.isArray(s.anyOf)) parts.push((s.anyOf as Json[]).map(schemaText).join(' or '));
  else parts.push('any JSON');
  if (s.format) parts.push(String(s.format));
  if (s.pattern && !s.format) parts.push(`\`${String(s.pattern)}\``);
  if (s.minLength !== undefined || s.maxLength !== undefined)
    parts.push(`length ${String(s.minLength ?? 0)}..${String(s.maxLength ?? '')}`);
  if (s.minimum !== undefined || s.maximum !== undefined) parts.push(`${String(s.minimum ?? '')}..${String(s.maximum ?? '')}`);
  if (s.maxItems !== undefined) parts.push(`at most ${String(s.maxItems)} items`);
  if (s.default !== undefined) parts.push(`default \`${JSON.stringify(s.default)}\``);
  return cell(parts.join(', '));
}

/** A parameter's schema, and what its description adds (a numeric parameter's range: it arrives as text). */
function paramText(s: Json): string {
  const text = schemaText(s);
  return typeof s.description === 'string' ? `${text}: ${cell(s.description)}` : text;
}

/** An object schema's members as a table (field, required, schema, description). */
function fields(schema: Json, head = 'field'): string[] {
  const props = Object.entries((schema.properties ?? {}) as Record<string, Json>);
  const required = new Set((schema.required ?? []) as string[]);
  const out = [`| ${head} | required | schema | |`, '| --- | --- | --- | --- |'];
  for (const [name, p] of props) {
    out.push(`| \`${name}\` | ${required.has(name) ? 'yes' : 'no'} | ${schemaText(p)} | ${cell(String(p.description ?? ''))} |`);
  }
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== false) out.push('| … | no | any JSON | other members |');
  return out;
}

function answerText(status: string, r: Json): string {
  const content = (r.content ?? {}) as Record<string, Json>;
  const [type, media] = Object.entries(content)[0] ?? [];
  const schema = media?.schema as Json | undefined;
  let what = '';
  if (type === 'application/json' && schema) what = schema.$ref ? ` (${link(String(schema.$ref))})` : '';
  else if (type) what = ` (\`${type}\`)`;
  return `- ${status}: ${cell(String(r.description))}${what}`;
}

function operationText(method: string, path: string, op: Json): string[] {
  const out = [`## ${method.toUpperCase()} ${path}`, '', String(op.summary), ''];
  const roles = op['x-roles'] as readonly string[] | 'any' | undefined;
  out.push(`- Operation: \`${String(op.operationId)}\``);
  out.push(`- Auth: ${roles === undefined ? 'none (public)' : roles === 'any' ? 'any token' : roles.map((r) => `\`${r}\``).join(', ')}`);
  if (op['x-worker']) out.push('- Also served by `acw-webhooks worker`.');
  out.push('');
  const params = (op.parameters ?? []) as Json[];
  if (params.length > 0) {
    out.push('| parameter | in | required | schema |', '| --- | --- | --- | --- |');
    for (const p of params)
      out.push(`| \`${String(p.name)}\` | ${String(p.in)} | ${p.required ? 'yes' : 'no'} | ${paramText(p.schema as Json)} |`);
    out.push('');
  }
  const body = op.requestBody as Json | undefined;
  if (body) {
    const schema = ((body.content as Json)['application/json'] as Json).schema as Json;
    if (Object.keys((schema.properties ?? {}) as Json).length === 0) out.push('No body (`{}` is accepted).', '');
    else out.push(`Body${body.required ? '' : ' (optional)'}:`, '', ...fields(schema), '');
  }
  out.push('Answers:', '');
  const all = Object.entries(op.responses as Record<string, Json>);
  const common = all.filter(([, r]) => typeof r.$ref === 'string').map(([status]) => status);
  for (const [status, r] of all) if (typeof r.$ref !== 'string') out.push(answerText(status, r));
  if (common.length > 0) out.push(`- ${common.join(', ')}: see [Errors](#errors)`);
  out.push('');
  // Each inline answer schema once, under the statuses that answer it.
  const shown: Array<{ statuses: string[]; schema: Json }> = [];
  for (const [status, r] of all) {
    const schema = ((r.content as Record<string, Json> | undefined)?.['application/json']?.schema ?? undefined) as Json | undefined;
    if (!schema || schema.$ref || !schema.properties) continue;
    const same = shown.find((x) => JSON.stringify(x.schema) === JSON.stringify(schema));
    if (same) same.statuses.push(status);
    else shown.push({ statuses: [status], schema });
  }
  for (const x of shown) out.push(`${x.statuses.join(', ')}:`, '', ...fields(x.schema), '');
  return out;
}

/** docs/api.md from the document. */
export function renderApiMarkdown(doc: Json = openApiDocument()): string {
  const components = doc.components as { schemas: Record<string, Json>; responses: Record<string, Json> };
  const out: string[] = [
    '# HTTP API',
    '',
    '<!-- Generated by `npm run docs` from src/http/contract/ (the zod schemas the routes validate and answer with); do not edit. -->',
    '',
    'The same document as OpenAPI 3.1 JSON: `GET /openapi.json` on a running `serve`, and',
    '[docs/openapi.json](openapi.json) in the repository. Every route but `/healthz`, `/readyz`, `/metrics`,',
    '`/openapi.json`, the dashboard and its sign-in takes `Authorization: Bearer <token>`',
    "(`npx acw-webhooks users add NAME --role admin|viewer|service` prints one) or the dashboard's session",
    'cookie. Bodies are JSON (`Content-Type: application/json`); an unknown field anywhere, query',
    'parameters of every `/v1` route included, is a 400 naming it. Every answer is written through its',
    'schema below: a member not listed is never sent.',
    '',
    '## Errors',
    '',
    'Every error answer, whatever its status, is one shape (the `Error` schema):',
    '',
    '```json',
    '{"error": {"code": "invalid_input", "message": "topic: expected lowercase dot-separated words …", "details": {"field": "topic"}}}',
    '```',
    '',
    ...fields(components.schemas.Error!.properties ? ((components.schemas.Error!.properties as Json).error as Json) : {}, 'member'),
    '',
    'Each route lists the statuses it can answer; these apply to many:',
    '',
    '| status | when |',
    '| --- | --- |',
    ...Object.values(COMMON_ERRORS).map((e) => `| ${e.status} | ${cell(e.description)} |`),
    '',
  ];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(ops)) out.push(...operationText(method, path, op));
  }
  out.push(
    '## Webhooks',
    '',
    'What we send to each endpoint (docs/receivers.md has the protocol in prose, with verification recipes).',
    '',
  );
  for (const [name, hook] of Object.entries(doc.webhooks as Record<string, Record<string, Json>>)) {
    const op = hook.post!;
    out.push(`### ${name}`, '', String(op.summary), '', String(op.description), '');
    out.push('| header | required | schema | |', '| --- | --- | --- | --- |');
    for (const p of op.parameters as Json[])
      out.push(
        `| \`${String(p.name)}\` | ${p.required ? 'yes' : 'no'} | ${schemaText(p.schema as Json)} | ${cell(String(p.description ?? ''))} |`,
      );
    out.push('', 'Body: [`Delivery`](#delivery). Your answer:', '');
    for (const [status, r] of Object.entries(op.responses as Record<string, Json>)) out.push(`- ${status}: ${cell(String(r.description))}`);
    out.push('');
  }
  out.push('## Schemas', '');
  for (const [name, schema] of Object.entries(components.schemas)) {
    out.push(`### ${name}`, '');
    if (schema.description) out.push(String(schema.description), '');
    out.push(...fields(schema), '');
  }
  return `${out.join('\n').trimEnd()}\n`;
}
