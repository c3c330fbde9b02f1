/**
 * The OpenAPI 3.1 document, generated from the route registry (routes.ts) and the answers' schemas
 * (answers.ts): served at /openapi.json, committed as docs/openapi.json (test/http/openapi.test.ts
 * fails on a breaking change to it), rendered as docs/api.md.
 *
 * Redocly's `recommended` rules pass it with no error; the warnings left are each listed, with
 * why, in LINT_WARNINGS below (test/http/openapi.test.ts fails on any other).
 */
import type { z } from 'zod';
import { VERSION } from '../../version.js';
import { COMPONENTS } from './answers.js';
import { COMMON_ERRORS, commonErrors, errorStatuses } from './errors.js';
import { jsonSchema, withRefs, type Json } from './json-schema.js';
import { ROUTES, type RouteDoc } from './routes.js';
import { webhooksSection } from './webhooks.js';
import { topicWebhooks } from '../../topics/docs.js';
import type { Topic } from '../../topics/rows.js';

/** The Redocly `recommended` warnings the document keeps on purpose. */
export const LINT_WARNINGS = [
  {
    rule: 'operation-4xx-response',
    at: ['/healthz', '/readyz', '/metrics', '/openapi.json', '/asyncapi.json', '/'],
    why: 'public reads that take no input: no request makes a client error of them, and a 4xx invented for them would be a lie',
  },
] as const;

const SCHEMAS = '#/components/schemas/';
const ERROR_REF = { $ref: `${SCHEMAS}Error` };

/** The path as OpenAPI writes it: `{name}` parameters, fastify's trailing `*` as `{file}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{file}');
}

/** An object schema's properties as OpenAPI parameters. */
function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const s = jsonSchema(schema, 'input');
  const props = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set((s.required ?? []) as string[]);
  return Object.entries(props).map(([name, p]) => ({ name, in: where, required: where === 'path' || required.has(name), schema: p }));
}

function operation(r: RouteDoc & { operationId: string }, named: Record<string, Json>): Json {
  const ref = (s: Json): unknown => withRefs(s, named, SCHEMAS);
  const op: Json = { operationId: r.operationId, summary: r.summary };
  const params = [...parameters(r.params, 'path'), ...parameters(r.query, 'query')];
  if (r.url.endsWith('*'))
    params.push({ name: 'file', in: 'path', required: true, schema: { type: 'string' }, description: 'a file of the built bundle' });
  for (const [name, h] of Object.entries(r.headers ?? {})) {
    params.push({ name, in: 'header', required: false, description: h.description, schema: jsonSchema(h.schema, 'input') });
  }
  if (params.length > 0) op.parameters = params;
  if (r.body) {
    const optional = r.body.safeParse(undefined).success || (r.noBodyIsEmpty === true && r.body.safeParse({}).success);
    op.requestBody = { required: !optional, content: { 'application/json': { schema: jsonSchema(r.body, 'input') } } };
  }
  // Public routes say so: no security at all, rather than none declared.
  op.security = r.access ? [{ bearer: [] }, { session: [] }] : [];
  if (r.access) op['x-roles'] = r.access;
  if (r.worker) op['x-worker'] = true;

  const responses: Record<string, Json> = {};
  for (const [status, a] of Object.entries(r.answers)) {
    const res: Json = { description: a.description };
    if (a.schema) res.content = { 'application/json': { schema: ref(jsonSchema(a.schema, 'output')) } };
    else if (a.contentType) res.content = { [a.contentType]: { schema: { type: 'string' } } };
    if (a.headers)
      res.headers = Object.fromEntries(Object.entries(a.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));
    responses[status] = res;
  }
  const common = commonErrors(r);
  for (const status of errorStatuses(r)) {
    const own = r.errors?.[status];
    const shared = common[status];
    if (own === undefined && shared) responses[status] = { $ref: `#/components/responses/${shared}` };
    else
      responses[status] = {
        description: shared ? `${own}; or ${COMMON_ERRORS[shared].description}` : own,
        content: { 'application/json': { schema: ERROR_REF } },
      };
  }
  op.responses = Object.fromEntries(Object.entries(responses).toSorted(([a], [b]) => a.localeCompare(b)));
  return op;
}

export interface DocumentOptions {
  /** Where the API is: server.public_url, or the address it listens on. */
  serverUrl?: string;
  /** The topic catalog: each live topic's delivery in `webhooks` (`topic.NAME`), its schemas in components. */
  topics?: readonly Topic[];
}

/** The document as a default server would serve it (docs, snapshot): at its default listen address. */
export const DEFAULT_SERVER_URL = 'http://127.0.0.1:8080';

let base: Json | undefined;

/** The OpenAPI 3.1 document of every route and of the webhooks we send. */
export function openApiDocument(opts: DocumentOptions = {}): Json {
  base ??= build();
  const { openapi, info, ...rest } = base;
  const doc: Json = { openapi, info, servers: [{ url: opts.serverUrl ?? DEFAULT_SERVER_URL }], ...rest };
  if (!opts.topics?.length) return doc;
  const t = topicWebhooks(opts.topics);
  const components = doc['components'] as Json;
  return {
    ...doc,
    webhooks: { ...(doc['webhooks'] as Json), ...t.webhooks },
    components: { ...components, schemas: { ...(components['schemas'] as Json), ...t.schemas } },
  };
}

function build(): Json {
  const named = Object.fromEntries(Object.entries(COMPONENTS).map(([n, s]) => [n, jsonSchema(s, 'output')]));
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of ROUTES) (paths[openApiPath(r.url)] ??= {})[r.method.toLowerCase()] = operation(r, named);
  const hooks = webhooksSection();
  const schemas: Record<string, unknown> = {};
  for (const [n, s] of Object.entries(named)) schemas[n] = withRefs(s, named, SCHEMAS, n);
  Object.assign(schemas, hooks.schemas);
  const responses: Record<string, Json> = {};
  for (const [name, e] of Object.entries(COMMON_ERRORS)) {
    responses[name] = { description: e.description, content: { 'application/json': { schema: ERROR_REF } } };
  }
  responses.unavailable!.headers = { 'Retry-After': { description: 'seconds to wait', schema: { type: 'string', pattern: '^[0-9]+$' } } };
  responses.unauthorized!.headers = { 'WWW-Authenticate': { description: '`Bearer`', schema: { type: 'string' } } };
  return {
    openapi: '3.1.0',
    info: {
      title: 'acw-webhooks',
      version: VERSION,
      description:
        'Signed, reliable webhook delivery on nothing but PostgreSQL. Every error answer is `{error: {code, message, details?}}` (the `Error` schema); `webhooks` describes the deliveries we send.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    paths,
    webhooks: hooks.webhooks,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'a token from `acw-webhooks users add NAME --role ROLE`' },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: 'acw_session',
          description: "the dashboard's session (POST /v1/session); a change it signs must come from the dashboard's own origin",
        },
      },
      schemas,
      responses,
    },
  };
}
