import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../admin/users.js';
import type { Role } from '../config/index.js';
import { ApiError } from '../errors.js';

/**
 * Bearer-token auth (roles: admin, viewer, service). Each route names the roles that may call it in its `config.roles`
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

export const SERVICE: readonly Role[] = ['service', 'admin'];
export const READ: readonly Role[] = ['viewer', 'admin'];
export const ADMIN: readonly Role[] = ['admin'];

const unauthorized = (message: string): ApiError =>
  new ApiError(401, 'unauthorized', message, { field: 'authorization' }, { 'www-authenticate': 'Bearer' });

function bearer(header: string | undefined): string {
  if (header === undefined) throw unauthorized('authorization: missing (expected "Bearer <token>")');
  const m = /^Bearer[ ]+(\S*)\s*$/i.exec(header);
  if (!m) throw unauthorized('authorization: expected "Bearer <token>"');
  if (!m[1]) throw unauthorized('authorization: empty token');
  return m[1];
}

export function installAuth(app: FastifyInstance, tokens: { authenticate(token: string): Promise<Principal | null> }): void {
  app.decorateRequest('principal', null);
  // onRequest: refused before the body is read, so an unauthenticated client cannot make us parse megabytes.
  app.addHook('onRequest', async (req: FastifyRequest) => {
    const roles = req.routeOptions.config.roles;
    if (roles === undefined) return;
    const principal = await tokens.authenticate(bearer(req.headers.authorization));
    if (!principal) throw unauthorized('authorization: unknown or revoked token');
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
