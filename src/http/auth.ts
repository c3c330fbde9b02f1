import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../admin/users.js';
import type { Role } from '../roles.js';
import { ApiError } from '../errors.js';

/**
 * Bearer-token auth (src/roles.ts), or the dashboard's session cookie. Each route's entry in the
 * registry (src/http/contract/routes.ts) names the roles that may call it, set as its `config.roles`
 * (`'any'`: every authenticated user); routes without it (health, metrics) are public. A known
 * token is served from the process's cache (src/admin/token-cache.ts: 1 s at most, a revoke evicts
 * it through NOTIFY), so the hot path reads no `users` row.
 */
declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    roles?: readonly Role[] | 'any';
  }
}

const unauthorized = (message: string): ApiError =>
  new ApiError(401, 'unauthorized', message, { field: 'authorization' }, { 'www-authenticate': 'Bearer' });

function bearer(header: string | undefined): string {
  if (header === undefined) throw unauthorized('authorization: missing (expected "Bearer <token>")');
  const m = /^Bearer[ ]+(\S*)\s*$/i.exec(header);
  if (!m) throw unauthorized('authorization: expected "Bearer <token>"');
  if (!m[1]) throw unauthorized('authorization: empty token');
  return m[1];
}

/** The dashboard's session cookie (src/http/routes/sessions.ts); it holds a random id, never a token. */
export const SESSION_COOKIE = 'acw_session';

/** One cookie's value from a `Cookie` header, or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export interface SessionAuth {
  authenticate(sessionId: string): Promise<Principal | null>;
  /** Whether a state-changing request's `Origin` is the dashboard's own (cross-site requests carry the cookie too). */
  sameOrigin(req: FastifyRequest): boolean;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Who is calling: a bearer token when there is an Authorization header (unchanged for API clients),
 * else the dashboard's session cookie, whose state-changing requests must come from our own origin.
 */
async function authenticate(
  req: FastifyRequest,
  tokens: { authenticate(token: string): Promise<Principal | null> },
  sessions: SessionAuth | undefined,
): Promise<Principal> {
  const sid = sessions && req.headers.authorization === undefined ? cookieValue(req.headers.cookie, SESSION_COOKIE) : undefined;
  if (sessions && sid !== undefined) {
    if (!SAFE_METHODS.has(req.method) && !sessions.sameOrigin(req)) {
      throw new ApiError(403, 'forbidden', 'origin: a signed-in request that changes state must come from the dashboard itself', {
        field: 'origin',
      });
    }
    const principal = await sessions.authenticate(sid);
    if (!principal) throw new ApiError(401, 'unauthorized', 'session: expired or signed out; sign in again', { field: 'session' });
    return principal;
  }
  const principal = await tokens.authenticate(bearer(req.headers.authorization));
  if (!principal) throw unauthorized('authorization: unknown or revoked token');
  return principal;
}

export function installAuth(
  app: FastifyInstance,
  tokens: { authenticate(token: string): Promise<Principal | null> },
  sessions?: SessionAuth,
): void {
  app.decorateRequest('principal', null);
  // onRequest: refused before the body is read, so an unauthenticated client cannot make us parse megabytes.
  app.addHook('onRequest', async (req: FastifyRequest) => {
    const roles = req.routeOptions.config.roles;
    if (roles === undefined) return;
    const principal = await authenticate(req, tokens, sessions);
    if (roles !== 'any' && !roles.includes(principal.role)) {
      throw new ApiError(403, 'forbidden', `role ${principal.role} may not ${req.method} ${req.routeOptions.url ?? ''}`, {
        role: principal.role,
        allowed: roles,
      });
    }
    req.principal = principal;
  });
}

/** The caller of an authenticated route (the hook guarantees one). */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError(401, 'unauthorized', 'authorization: required');
  return req.principal;
}
