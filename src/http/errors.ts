import type { z } from 'zod';
import { ApiError } from '../errors.js';

/** Every error answer has this one shape, `{error: {code, message, details?}}`, naming the offending field where there is one. */
export interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

type Issue = z.core.$ZodIssue;

/** `events[3].topic` from zod's path; the request part (`body`, `query`) when the path is empty. */
export function fieldName(path: readonly PropertyKey[], root: string): string {
  let out = '';
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : out === '' ? String(seg) : `.${String(seg)}`;
  return out === '' ? root : out;
}

function describe(issue: Issue, root: string): Array<{ field: string; message: string }> {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((k) => ({ field: fieldName([...issue.path, k], root), message: 'unknown field' }));
  }
  return [{ field: fieldName(issue.path, root), message: issue.message }];
}

/** A zod failure as a 400 naming the first bad field (all of them in details), or a 413 for oversized event data. */
export function fromZod(error: z.ZodError, root: string): ApiError {
  const problems = error.issues.flatMap((i) => describe(i, root));
  const first = problems[0] ?? { field: root, message: 'invalid' };
  const tooBig = error.issues.find((i) => i.code === 'too_big' && i.path.at(-1) === 'data');
  if (tooBig) {
    const field = fieldName(tooBig.path, root);
    return new ApiError(413, 'payload_too_large', `${field}: ${tooBig.message}`, { field });
  }
  const unknown = error.issues.some((i) => i.code === 'unrecognized_keys');
  const message =
    problems.length > 1 ? `${first.field}: ${first.message} (and ${problems.length - 1} more)` : `${first.field}: ${first.message}`;
  return new ApiError(400, unknown && problems.every((p) => p.message === 'unknown field') ? 'unknown_field' : 'invalid_input', message, {
    field: first.field,
    issues: problems.slice(0, 20),
  });
}

const FASTIFY_CODES: Record<string, { code: string; field?: string; message?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'body_too_large', field: 'body' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    field: 'content-type',
    message: 'content-type: expected application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'bad_request', field: 'content-length' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'invalid_json', field: 'body' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'invalid_json', field: 'body' },
  FST_ERR_BAD_URL: { code: 'bad_url', field: 'url', message: 'url: malformed (bad percent-encoding?)' },
};

// Connection-level database failures: the service is unavailable, the request was fine.
const DB_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08003',
  '08006',
]);

const DB_REFUSES_WRITES = new Set(['25006', '53100']);

export interface MappedError {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
  /** Not an anticipated refusal: log it (with the stack) so it gets fixed. */
  unexpected: boolean;
}

/** Map whatever a route threw to a status and error body. Only a bug or an outage is a 5xx. */
const body = (code: string, message: string, details?: Record<string, unknown>): ErrorBody => ({
  error: details ? { code, message, details } : { code, message },
});

export function mapError(err: unknown, maxBody: number): MappedError {
  if (err instanceof ApiError)
    return { status: err.status, body: body(err.code, err.message, err.details), headers: err.headers, unexpected: false };
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const statusCode = typeof e?.statusCode === 'number' ? e.statusCode : 0;
  const text = typeof e?.message === 'string' ? e.message : 'error';
  const known = FASTIFY_CODES[code];
  if (known) {
    const status = statusCode >= 400 && statusCode < 500 ? statusCode : 400;
    const message =
      known.message ??
      (code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? `body: larger than server.max_body (${maxBody} bytes)` : `${known.field}: ${text}`);
    return { status, body: body(known.code, message, known.field ? { field: known.field } : undefined), headers: {}, unexpected: false };
  }
  if (statusCode >= 400 && statusCode < 500) return { status: statusCode, body: body('bad_request', text), headers: {}, unexpected: false };
  // A read-only (25006: a hot standby, default_transaction_read_only) or full (53100) database: nothing was written, so nothing is acknowledged.
  if (DB_REFUSES_WRITES.has(code)) {
    return {
      status: 503,
      body: body('unavailable', 'the database refuses writes (read-only or full); nothing was written; try again'),
      headers: { 'retry-after': '5' },
      unexpected: true,
    };
  }
  if (DB_UNAVAILABLE.has(code) || /Connection terminated|timeout exceeded when trying to connect/i.test(text)) {
    return {
      status: 503,
      body: body('unavailable', 'the database is unavailable; try again'),
      headers: { 'retry-after': '1' },
      unexpected: true,
    };
  }
  // SQLSTATE class 22 (data exception): input validation should have caught it; still the client's input.
  if (/^22[0-9A-Z]{3}$/.test(code))
    return { status: 400, body: body('invalid_input', `rejected by the database: ${text}`), headers: {}, unexpected: true };
  return { status: 500, body: body('internal', 'internal error; it has been logged'), headers: {}, unexpected: true };
}
