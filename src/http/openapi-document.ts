/**
 * The OpenAPI 3.1 document built from the route registry in openapi.ts (served at /openapi.json), and
 * docs/api.md rendered from that document by scripts/docs.mjs.
 */
import { z } from 'zod';
import { VERSION } from '../version.js';
import { ROUTES } from './openapi.js';

type Json = Record<string, unknown>;

/** JSON Schema of what a client sends (input side of transforms), draft 2020-12 as OpenAPI 3.1 uses. */
function jsonSchema(schema: z.ZodType): Json {
  const out = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }) as Json;
  delete out.$schema;
  return out;
}

/** An object schema's properties as OpenAPI parameters. */
function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const s = jsonSchema(schema);
  const props = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set((s.required ?? []) as string[]);
  return Object.entries(props).map(([name, p]) => ({ name, in: where, required: where === 'path' || required.has(name), schema: p }));
}

const ERROR = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} },
    },
  },
};

function response(description: string): Json {
  return { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
}

/** The OpenAPI 3.1 document of every route, generated from ROUTES. */
export function openApiDocument(): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of ROUTES) {
    const path = r.url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const op: Json = {
      operationId: `${r.method.toLowerCase()}${r.url.replace(/[:/.-]+([a-z])?/g, (_, c?: string) => (c ?? '').toUpperCase())}`,
      summary: r.summary,
    };
    const params = [...parameters(r.params, 'path'), ...parameters(r.query, 'query')];
    if (params.length > 0) op.parameters = params;
    if (r.body)
      op.requestBody = { required: !r.body.safeParse(undefined).success, content: { 'application/json': { schema: jsonSchema(r.body) } } };
    const responses: Record<string, Json> = {
      [String(r.ok.status)]: { description: r.ok.description, content: { [r.ok.contentType ?? 'application/json']: {} } },
    };
    if (r.params || r.query || r.body) responses['400'] = { $ref: '#/components/responses/invalid' };
    if (r.roles) {
      op.security = [{ bearer: [] }];
      op['x-roles'] = r.roles;
      responses['401'] = { $ref: '#/components/responses/unauthorized' };
      responses['403'] = { $ref: '#/components/responses/forbidden' };
    }
    if (r.worker) op['x-worker'] = true;
    op.responses = responses;
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'acw-webhooks',
      version: VERSION,
      description:
        'Signed, reliable webhook delivery on nothing but PostgreSQL. Every error answer is `{error: {code, message, details?}}`.',
    },
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'a token from `acw-webhooks users add NAME --role ROLE`' },
      },
      schemas: { Error: ERROR },
      responses: {
        invalid: response('invalid input: the message names the field'),
        unauthorized: response('no token, or an unknown or revoked one'),
        forbidden: response('the token is valid but its role may not call this route'),
      },
    },
  };
}

function schemaText(s: Json): string {
  const parts: string[] = [];
  if (Array.isArray(s.enum)) parts.push((s.enum as unknown[]).map((v) => `\`${String(v)}\``).join(', '));
  else if (s.const !== undefined) parts.push(`\`${String(s.const)}\``);
  else if (s.type === 'array') parts.push(`array of ${schemaText((s.items ?? {}) as Json) || 'any JSON'}`);
  else if (typeof s.type === 'string') parts.push(s.type);
  else if (Array.isArray(s.anyOf)) parts.push((s.anyOf as Json[]).map(schemaText).join(' or '));
  else parts.push('any JSON');
  if (s.format) parts.push(String(s.format));
  if (s.pattern && !s.format) parts.push(`\`${String(s.pattern).replace(/\|/g, '\\|')}\``);
  if (s.minLength !== undefined || s.maxLength !== undefined)
    parts.push(`length ${String(s.minLength ?? 0)}..${String(s.maxLength ?? '')}`);
  if (s.minimum !== undefined || s.maximum !== undefined) parts.push(`${String(s.minimum ?? '')}..${String(s.maximum ?? '')}`);
  if (s.maxItems !== undefined) parts.push(`at most ${String(s.maxItems)} items`);
  if (s.default !== undefined) parts.push(`default \`${JSON.stringify(s.default)}\``);
  return parts.join(', ');
}

/** docs/api.md: the OpenAPI document as markdown, one section per route. */
export function renderApiMarkdown(doc: Json = openApiDocument()): string {
  const out: string[] = [
    '# HTTP API',
    '',
    '<!-- Generated by `npm run docs` from src/http/openapi.ts (the zod schemas the routes validate with); do not edit. -->',
    '',
    'The same document as OpenAPI 3.1 JSON: `GET /openapi.json` on a running `serve`. Every route but',
    '`/healthz`, `/readyz`, `/metrics` and `/openapi.json` takes `Authorization: Bearer <token>`',
    '(`npx acw-webhooks users add NAME --role admin|viewer|service` prints one). Bodies are JSON',
    '(`Content-Type: application/json`); an unknown field anywhere, query parameters included, is a 400',
    'naming it. Every error answer is `{"error": {"code", "message", "details"?}}`.',
    '',
  ];
  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      out.push(`## ${method.toUpperCase()} ${path}`, '', String(op.summary), '');
      const roles = op['x-roles'] as readonly string[] | 'any' | undefined;
      out.push(
        `- Auth: ${roles === undefined ? 'none (public)' : roles === 'any' ? 'any token' : roles.map((r) => `\`${r}\``).join(', ')}`,
      );
      if (op['x-worker']) out.push('- Also served by `acw-webhooks worker`.');
      const responses = op.responses as Record<string, Json>;
      for (const [status, r] of Object.entries(responses)) if (!('$ref' in r)) out.push(`- ${status}: ${String(r.description)}`);
      out.push('');
      const params = (op.parameters ?? []) as Json[];
      if (params.length > 0) {
        out.push('| parameter | in | required | schema |', '| --- | --- | --- | --- |');
        for (const p of params)
          out.push(`| \`${String(p.name)}\` | ${String(p.in)} | ${p.required ? 'yes' : 'no'} | ${schemaText(p.schema as Json)} |`);
        out.push('');
      }
      const body = op.requestBody as Json | undefined;
      if (body) {
        const schema = ((body.content as Json)['application/json'] as Json).schema as Json;
        const props = Object.entries((schema.properties ?? {}) as Record<string, Json>);
        if (props.length === 0) {
          out.push('No body (`{}` is accepted).', '');
        } else {
          const required = new Set((schema.required ?? []) as string[]);
          out.push(`Body${body.required ? '' : ' (optional)'}:`, '', '| field | required | schema |', '| --- | --- | --- |');
          for (const [name, p] of props) out.push(`| \`${name}\` | ${required.has(name) ? 'yes' : 'no'} | ${schemaText(p)} |`);
          out.push('');
        }
      }
    }
  }
  return `${out.join('\n')}`;
}
