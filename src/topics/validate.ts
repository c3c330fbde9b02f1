/**
 * JSON Schema (draft 2020-12) for the topic catalog (docs/operations.md#topic-catalog): a schema is
 * compiled once per version and kept; a failing value is told as JSON Pointers into the request
 * (`/data/order_id: required`, `/events/3/data/order_id: required` in a batch).
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { badField } from '../errors.js';

// ajv-formats is CommonJS with its function as `default`: under ESM it comes wrapped once more.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

/** One failing field: where (a JSON Pointer into the request) and why. */
export interface Problem {
  pointer: string;
  message: string;
}

export const problemText = (p: Problem): string => `${p.pointer}: ${p.message}`;

function newAjv(): Ajv2020 {
  // strict: a keyword Ajv does not know (a typo such as "requird") is a schema that does not compile.
  // Types and tuples are not held to Ajv's stricter habits: `{"required": ["id"]}` alone is a fine schema.
  const made = new Ajv2020({
    allErrors: true,
    strict: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    validateFormats: true,
  });
  addFormats(made);
  return made;
}

let shared: Ajv2020 | null = null;
/** One Ajv for the process: its compiled functions are what the catalogs cache. */
function ajv(): Ajv2020 {
  shared ??= newAjv();
  return shared;
}

/** `~` and `/` escaped as a JSON Pointer's reference token needs them. */
const token = (name: string): string => name.replaceAll('~', '~0').replaceAll('/', '~1');

/** Ajv's errors as Problems under `prefix` (`/data` or `/events/3/data`). */
export function problemsOf(errors: readonly ErrorObject[] | null | undefined, prefix: string): Problem[] {
  return (errors ?? []).map((e) => {
    const at = `${prefix}${e.instancePath}`;
    if (e.keyword === 'required') return { pointer: `${at}/${token(String(e.params['missingProperty']))}`, message: 'required' };
    if (e.keyword === 'additionalProperties' || e.keyword === 'unevaluatedProperties') {
      const name = String(e.params['additionalProperty'] ?? e.params['unevaluatedProperty']);
      return { pointer: `${at}/${token(name)}`, message: 'not allowed: not a property of the schema' };
    }
    return { pointer: at, message: e.message ?? e.keyword };
  });
}

/**
 * Compile a schema; a schema that does not compile, or an example that does not match it, is a 400
 * naming the field (`schema: ...`, `examples/1/order_id: required`). Answers the compiled function.
 */
export function compileChecked(schema: unknown, examples: readonly unknown[], field = ''): ValidateFunction {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw badField(`${field}schema`, 'expected a JSON Schema object');
  const s = schema as Record<string, unknown>;
  const dialect = s['$schema'];
  if (dialect !== undefined && dialect !== 'https://json-schema.org/draft/2020-12/schema')
    throw badField(
      `${field}schema`,
      `only JSON Schema draft 2020-12 is supported ("$schema": "https://json-schema.org/draft/2020-12/schema" or none), got ${JSON.stringify(dialect)}`,
    );
  let fn: ValidateFunction;
  try {
    fn = compile(s);
  } catch (err) {
    throw badField(`${field}schema`, `does not compile: ${(err as Error).message}`);
  }
  examples.forEach((ex, i) => {
    if (!fn(ex)) {
      const [first, ...rest] = problemsOf(fn.errors, `${field}examples/${i}`);
      const more = rest.length > 0 ? ` (and ${rest.length} more)` : '';
      throw badField(`${field}examples/${i}`, `does not match its schema: ${problemText(first!)}${more}`, {
        problems: [first, ...rest],
      });
    }
  });
  return fn;
}

/**
 * Compiled functions by schema text: the same schema (the same version, read again after a
 * refresh, or by a second catalog in this process) is compiled once. Versions are never edited,
 * so an entry never goes stale; one per version ever seen by this process.
 */
const compiled = new Map<string, ValidateFunction>();

export function compile(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  let fn = compiled.get(key);
  if (fn === undefined) {
    // $id would make a second compile of the same id fail in the shared Ajv: each schema is its own document.
    const { $id: _id, ...rest } = schema;
    fn = ajv().compile(rest);
    compiled.set(key, fn);
  }
  return fn;
}
