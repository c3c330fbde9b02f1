import fastJson from 'fast-json-stringify';
import type { z } from 'zod';
import { errorAnswer } from './answers.js';
import { errorStatuses } from './errors.js';
import { jsonSchema, type Json } from './json-schema.js';
import { OPERATIONS, type OperationId, type RouteDoc } from './routes.js';

/**
 * The answers' serializers: each JSON answer of the registry as fastify's response schema, which
 * fastify writes with fast-json-stringify (the properties listed, in their types, nothing else).
 * Made once per process: the JSON Schemas here, and each compiled serializer in the compiler's
 * cache (the error answer, shared by every route, compiles once; a test suite starting many
 * servers compiles each answer once).
 */

const converted = new WeakMap<z.ZodType, Json>();
const output = (schema: z.ZodType): Json => {
  let s = converted.get(schema);
  if (!s) converted.set(schema, (s = jsonSchema(schema, 'output')));
  return s;
};

const byRoute = new Map<OperationId, Record<string, Json>>();

/** fastify's `schema.response` of an operation: each status it answers with JSON, errors included. */
export function responseSchemas(id: OperationId): Record<string, Json> {
  let out = byRoute.get(id);
  if (out) return out;
  const r: RouteDoc = OPERATIONS[id];
  out = {};
  for (const [status, a] of Object.entries(r.answers)) if (a.schema) out[status] = output(a.schema);
  for (const status of errorStatuses(r)) out[String(status)] = output(errorAnswer);
  byRoute.set(id, out);
  return out;
}

type Serialize = (data: unknown) => string;
const compiled = new WeakMap<object, Serialize>();

/** fastify's serializer compiler with a cache: one compiled function per schema object per process. */
export function serializerCompiler({ schema }: { schema: unknown }): Serialize {
  const key = schema as object;
  let f = compiled.get(key);
  if (!f) compiled.set(key, (f = fastJson(schema as Parameters<typeof fastJson>[0])));
  return f;
}
