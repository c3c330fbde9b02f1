// Every answer a test server gives, checked against the OpenAPI document while the tests run: its
// status is one the operation lists, a JSON body matches that status's schema, and no field the
// handler returned was dropped by the serializer (a view that gained a field its schema lacks).
// A violation fails the test that caused it (contractHooksForThisFile below); startApi installs the hooks on the server.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { openApiDocument, openApiPath } from '../../src/http/contract/document.js';
import { ROUTES } from '../../src/http/contract/routes.js';

type Json = Record<string, unknown>;

const doc = openApiDocument();
const components = doc.components as { schemas: Json; responses: Record<string, Json> };
// The document's refs (#/components/schemas/X) as refs into one schema's $defs, which ajv resolves.
const rebased = JSON.parse(JSON.stringify(components.schemas).replaceAll('#/components/schemas/', '#/$defs/')) as Json;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);

const validators = new Map<object, ValidateFunction>();
function validatorOf(schema: Json): ValidateFunction {
  let v = validators.get(schema);
  if (!v) {
    const s = JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', '#/$defs/')) as Json;
    validators.set(schema, (v = ajv.compile({ ...s, $defs: rebased })));
  }
  return v;
}

const ERROR = components.schemas.Error as Json;
const opOf = new Map(ROUTES.map((r) => [`${r.method} ${r.url}`, r.operationId]));
const operations = doc.paths as Record<string, Record<string, Json>>;

/** A response object, `$ref`s to components.responses followed. */
function responseOf(op: Json, status: number): Json | undefined {
  const all = op.responses as Record<string, Json>;
  const r = all[String(status)] ?? all[`${String(status)[0]}XX`];
  if (r && typeof r.$ref === 'string') return components.responses[r.$ref.slice(r.$ref.lastIndexOf('/') + 1)];
  return r;
}

const mediaType = (v: unknown): string =>
  String(v ?? '')
    .split(';')[0]!
    .trim();

/** The paths (`items[0].circuit.last_error`) present in `raw` and absent from `sent`: what the serializer dropped. */
function dropped(raw: unknown, sent: unknown, at = ''): string[] {
  if (Array.isArray(raw) && Array.isArray(sent)) return raw.flatMap((x, i) => dropped(x, sent[i], `${at}[${i}]`));
  if (typeof raw !== 'object' || raw === null || typeof sent !== 'object' || sent === null) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined) continue;
    const path = at ? `${at}.${k}` : k;
    if (!(k in sent)) out.push(path);
    else out.push(...dropped(v, (sent as Json)[k], path));
  }
  return out;
}

/** What is wrong with one answer, as found against the document; empty when nothing is. */
export function checkAnswer(a: {
  method: string;
  url: string | undefined;
  status: number;
  contentType: unknown;
  body: string;
  raw?: unknown;
}): string[] {
  const method = a.method === 'HEAD' ? 'GET' : a.method;
  const where = `${a.method} ${a.url ?? '(no route)'} -> ${a.status}`;
  const json = mediaType(a.contentType) === 'application/json';
  const parse = (): unknown => {
    try {
      return JSON.parse(a.body);
    } catch {
      return undefined;
    }
  };
  if (a.url === undefined || !opOf.has(`${method} ${a.url}`)) {
    // No route: the not-found handler or a request fastify refused before routing. Still the one error shape.
    if (a.status < 400 || !json || !validatorOf(ERROR)(parse())) return [`${where}: not an Error answer: ${a.body.slice(0, 200)}`];
    return [];
  }
  const op = operations[openApiPath(a.url)]?.[method.toLowerCase()];
  if (!op) return [`${where}: the document has no such operation`];
  const res = responseOf(op, a.status);
  if (!res) return [`${where}: status ${a.status} is not documented for ${String(op.operationId)} (${a.body.slice(0, 200)})`];
  const content = res.content as Record<string, { schema?: Json }> | undefined;
  if (!content) return a.body === '' ? [] : [`${where}: documented without a body, sent ${a.body.slice(0, 100)}`];
  if (a.method === 'HEAD') return [];
  const media = content['application/json'];
  if (!json) {
    const types = Object.keys(content);
    const ok = types.includes(mediaType(a.contentType)) || types.includes('application/octet-stream');
    return ok ? [] : [`${where}: content type ${String(a.contentType)}, documented ${types.join(', ')}`];
  }
  if (!media?.schema) return [`${where}: JSON sent, documented ${Object.keys(content).join(', ')}`];
  // The two documents: checked by their own tests (test/http/openapi.test.ts, test/topics/docs.test.ts).
  if (String(op.operationId) === 'openapi' || String(op.operationId) === 'asyncapi') return [];
  const body = parse();
  const validate = validatorOf(media.schema);
  const problems = validate(body)
    ? []
    : (validate.errors ?? [])
        .slice(0, 5)
        .map((e) => `${where}: ${e.instancePath || '(body)'} ${e.message ?? 'invalid'} ${JSON.stringify(e.params)}`);
  if (a.raw !== undefined)
    for (const p of dropped(a.raw, body))
      if (!allowedDrops.has(p))
        problems.push(`${where}: ${p} was returned by the handler but is not in the answer's schema, so it was not sent`);
  return problems;
}

/**
 * What is wrong with a delivery we sent, against the document's `webhooks` entry `name`: a required
 * header missing, a header or the body not matching its schema.
 */
export function checkWebhook(name: string, headers: Record<string, string | string[] | undefined>, body: string): string[] {
  const op = ((doc.webhooks as Record<string, Record<string, Json>>)[name]?.post ?? {}) as Json;
  const problems: string[] = [];
  for (const p of (op.parameters ?? []) as Json[]) {
    const value = headers[String(p.name).toLowerCase()];
    if (value === undefined) {
      if (p.required) problems.push(`${name}: header ${String(p.name).toLowerCase()} missing`);
      continue;
    }
    const v = validatorOf(p.schema as Json);
    if (!v(value)) problems.push(`${name}: header ${String(p.name).toLowerCase()} ${JSON.stringify(v.errors?.[0]?.message)}`);
  }
  const schema = ((op.requestBody as Json).content as Record<string, Json>)['application/json']!.schema as Json;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [...problems, `${name}: body is not JSON`];
  }
  const v = validatorOf(schema);
  if (!v(parsed)) problems.push(...(v.errors ?? []).map((e) => `${name}: body ${e.instancePath || '(body)'} ${e.message ?? 'invalid'}`));
  return problems;
}

const violations: string[] = [];
const allowedDrops = new Set<string>();
/** Operations answered in this file, with the statuses they answered: for the test that calls every one. */
export const answered = new Map<string, Set<number>>();

/** Let the test running now return these paths without them in the schema (they are dropped on purpose). */
export function allowDropped(...paths: string[]): void {
  for (const p of paths) allowedDrops.add(p);
}

const RAW = Symbol('raw answer');

/** The hooks startApi installs on each test server. */
export function installContractCheck(app: FastifyInstance): void {
  app.addHook('preSerialization', async (req: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
    (req as unknown as Record<symbol, unknown>)[RAW] = JSON.parse(JSON.stringify(payload ?? null)) as unknown;
    return payload;
  });
  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const url = req.routeOptions.url;
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const op = opOf.get(`${method} ${url}`);
    if (op) {
      const seen = answered.get(op) ?? new Set<number>();
      seen.add(reply.statusCode);
      answered.set(op, seen);
    }
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '';
    const raw = (req as unknown as Record<symbol, unknown>)[RAW];
    violations.push(
      ...checkAnswer({ method: req.method, url, status: reply.statusCode, contentType: reply.getHeader('content-type'), body, raw }),
    );
    return payload;
  });
}

/** Throw (failing the test that ran) when an answer broke the document since the last call. */
export function assertAnswersDocumented(): void {
  allowedDrops.clear();
  if (violations.length === 0) return;
  const list = violations.splice(0);
  throw new Error(`answers that do not match the OpenAPI document (src/http/contract/):\n- ${list.join('\n- ')}`);
}

/**
 * The hooks of one test file: each test fails for the answers it caused, the file for those of
 * its hooks, and `answered` starts empty. test/helpers/per-file.ts calls it for every file: test
 * files share this module within a worker (vitest.config.ts, isolate: false), so hooks registered
 * at its top level would belong to the first file that imported it only.
 */
export function contractHooksForThisFile(): void {
  beforeAll(() => {
    answered.clear();
    violations.splice(0);
    allowedDrops.clear();
  });
  afterEach(() => assertAnswersDocumented());
  afterAll(() => assertAnswersDocumented());
}
