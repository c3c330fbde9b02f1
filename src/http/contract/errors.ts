import type { RouteDoc } from './routes.js';

/**
 * The error answers every route of a kind can give, each `{error: {code, message, details?}}`
 * (answers.ts errorAnswer), named once in the document's `components.responses` and referenced by
 * each operation: which apply to a route follows from its registry entry.
 */
export const COMMON_ERRORS = {
  invalid: {
    status: 400,
    description: 'invalid input: an unknown field or query parameter, a malformed value or body; `details.field` names it',
  },
  unauthorized: { status: 401, description: 'no token, or an unknown or revoked one (`WWW-Authenticate: Bearer`)' },
  forbidden: { status: 403, description: "the token's role may not call this route, or a signed-in change from another site" },
  tooLarge: { status: 413, description: 'the body is larger than `server.max_body`' },
  unsupportedMediaType: { status: 415, description: 'the body is not `application/json`' },
  internal: { status: 500, description: 'a bug: it has been logged' },
  unavailable: {
    status: 503,
    description: 'the database is unavailable or refuses writes; nothing was written; try again after `Retry-After` seconds',
  },
} as const;

export type CommonError = keyof typeof COMMON_ERRORS;

/** The common errors a route gives, by status. */
export function commonErrors(r: RouteDoc): Partial<Record<number, CommonError>> {
  const out: Partial<Record<number, CommonError>> = {};
  const v1 = r.url.startsWith('/v1/');
  if (r.params || r.query || r.body || v1) out[400] = 'invalid';
  if (r.access) {
    out[401] = 'unauthorized';
    out[403] = 'forbidden';
  }
  if (r.body) {
    out[413] = 'tooLarge';
    out[415] = 'unsupportedMediaType';
  }
  out[500] = 'internal';
  // Every /v1 route reads the database (a token, a session, a row).
  if (v1) out[503] = 'unavailable';
  return out;
}

/** Every error status of a route: the common ones and its own (its own description wins). */
export function errorStatuses(r: RouteDoc): number[] {
  const s = new Set([...Object.keys(commonErrors(r)), ...Object.keys(r.errors ?? {})].map(Number));
  for (const status of Object.keys(r.answers).map(Number)) s.delete(status);
  return [...s].toSorted((a, b) => a - b);
}
