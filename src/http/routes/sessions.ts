import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../../admin/users.js';
import { ApiError } from '../../errors.js';
import { ACCESS, type Role } from '../../roles.js';
import type { Service } from '../../service.js';
import { hashToken } from '../../users.js';
import { cookieValue, principalOf, SESSION_COOKIE, type SessionAuth } from '../auth.js';
import { route, type AnswerAt } from '../route.js';

/**
 * Dashboard sign-in (docs/operations.md#dashboard): `POST /v1/session` trades an API token for a
 * random session id, stored as its SHA-256 in `sessions`; the browser keeps the id in an HttpOnly,
 * SameSite=Strict cookie (Secure when server.public_url is https), so the token itself never stays
 * in the page, a URL or storage. `GET /v1/session` says who is signed in, `DELETE` signs out.
 */

// Roles that can read the dashboard's pages; a service token only sends events.
const DASHBOARD_ROLES: readonly Role[] = ACCESS.read;

/** A URL's origin (`https://acw.example.com`), or undefined for none or a malformed one. */
function originOf(url: string): string | undefined {
  try {
    return url ? new URL(url).origin : undefined;
  } catch {
    return undefined;
  }
}

export class Sessions implements SessionAuth {
  private readonly publicOrigin: string | undefined;
  readonly secure: boolean;

  constructor(
    private readonly svc: Service,
    publicUrl: string = svc.config.server.public_url,
  ) {
    this.publicOrigin = originOf(publicUrl);
    this.secure = publicUrl.startsWith('https:');
  }

  private get ttlMs(): number {
    return this.svc.config.server.session_ttl;
  }

  async authenticate(sessionId: string): Promise<Principal | null> {
    // Our ids are 43 characters; anything else is no session of ours and is not worth a query.
    if (!/^[A-Za-z0-9_-]{20,100}$/.test(sessionId)) return null;
    const res = await this.svc.db.pool.query<{ id: string; name: string; role: Role }>(
      `select u.id::text as id, u.name, u.role from sessions s join users u on u.id = s.user_id
       where s.id_hash = $1 and s.expires_at > now() and u.revoked_at is null`,
      [hashToken(sessionId)],
    );
    return res.rows[0] ?? null;
  }

  /** `Origin` is this server as the browser reached it (the Host it sent), or server.public_url. */
  sameOrigin(req: FastifyRequest): boolean {
    const origin = req.headers.origin;
    if (typeof origin !== 'string' || origin === 'null') return false;
    if (origin === this.publicOrigin) return true;
    const host = req.headers.host;
    return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
  }

  /** A new session for a valid token of a dashboard role: its id (for the cookie only) and expiry. */
  async open(token: string): Promise<{ id: string; principal: Principal; expiresAt: Date }> {
    const principal = await this.svc.tokenCache().authenticate(token);
    if (!principal) throw new ApiError(401, 'unauthorized', 'token: unknown or revoked token', { field: 'token' });
    if (!DASHBOARD_ROLES.includes(principal.role)) {
      throw new ApiError(403, 'forbidden', `token: role ${principal.role} cannot sign in to the dashboard (admin or viewer can)`, {
        field: 'token',
        role: principal.role,
      });
    }
    const id = randomBytes(32).toString('base64url');
    const pool = this.svc.db.pool;
    // Expired sessions go as new ones come, a few at a time, so the table never needs a runner of its own.
    await pool.query(`delete from sessions where id_hash in (select id_hash from sessions where expires_at < now() limit 100)`);
    const res = await pool.query<{ expires_at: Date }>(
      `insert into sessions (id_hash, user_id, expires_at)
       select $1, id, now() + $3 * interval '1 millisecond' from users where id = $2 and revoked_at is null and token_hash = $4
       returning expires_at`,
      // The token itself, not only the user: one reissued within the token cache's second opens no session.
      [hashToken(id), principal.id, this.ttlMs, hashToken(token)],
    );
    const row = res.rows[0];
    if (!row) throw new ApiError(401, 'unauthorized', 'token: unknown or revoked token', { field: 'token' });
    return { id, principal, expiresAt: row.expires_at };
  }

  async close(sessionId: string): Promise<void> {
    await this.svc.db.pool.query(`delete from sessions where id_hash = $1`, [hashToken(sessionId)]);
  }

  cookie(value: string, maxAgeS: number): string {
    return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${this.secure ? '; Secure' : ''}`;
  }
}

const view = (p: Principal, expiresAt?: Date) => ({
  user: { name: p.name, role: p.role },
  ...(expiresAt ? { expires_at: expiresAt.toISOString() } : {}),
});

export function sessionRoutes(app: FastifyInstance, svc: Service, sessions: Sessions): void {
  route(app, 'signIn', async ({ body: { token } }, req, reply) => {
    // A sign-in from another site (login CSRF) is refused; a client without Origin (curl) is no browser page.
    if (req.headers.origin !== undefined && !sessions.sameOrigin(req)) {
      throw new ApiError(403, 'forbidden', 'origin: sign in from the dashboard itself', { field: 'origin' });
    }
    const s = await sessions.open(token);
    svc.log.info({ event: 'session.opened', user: s.principal.name, role: s.principal.role }, 'dashboard sign-in');
    return reply
      .header('set-cookie', sessions.cookie(s.id, Math.floor(svc.config.server.session_ttl / 1000)))
      .header('cache-control', 'no-store')
      .send(view(s.principal, s.expiresAt) satisfies AnswerAt<'signIn', 200>);
  });

  route(app, 'getSession', async (_in, req, reply) =>
    reply.header('cache-control', 'no-store').send(view(principalOf(req)) satisfies AnswerAt<'getSession', 200>),
  );

  // Sign-out needs no valid session: an expired one still gets its cookie cleared.
  route(app, 'signOut', async (_in, req, reply) => {
    const sid = cookieValue(req.headers.cookie, SESSION_COOKIE);
    if (sid !== undefined) {
      if (!sessions.sameOrigin(req))
        throw new ApiError(403, 'forbidden', 'origin: sign out from the dashboard itself', { field: 'origin' });
      if (/^[A-Za-z0-9_-]{20,100}$/.test(sid)) await sessions.close(sid);
    }
    return reply.header('set-cookie', sessions.cookie('', 0)).code(204).send();
  });
}
