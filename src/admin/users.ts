import { timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { ROLES, type Role } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { hashToken, newToken, type Principal } from '../users.js';
import { writeAudit } from './audit.js';
import { ApiError, badField } from '../errors.js';
import { forgetUser } from './token-cache.js';

export type { Principal };

export interface UserView {
  name: string;
  role: Role;
  created_at: string;
  revoked_at: string | null;
}

const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

function requireName(name: unknown): string {
  if (typeof name !== 'string' || !NAME.test(name)) throw badField('name', 'expected 1-64 letters, digits or "_.@-"');
  return name;
}

function requireRole(role: unknown): Role {
  if (!ROLES.includes(role as Role)) throw badField('role', `expected one of ${ROLES.join(', ')}`);
  return role as Role;
}

/** A new user with a fresh token: the only time the token is ever shown. */
export async function addUser(
  db: pg.Pool,
  u: { name: string; role: string },
  actor: string,
): Promise<{ name: string; role: Role; token: string }> {
  const name = requireName(u.name);
  const role = requireRole(u.role);
  const token = newToken();
  const added = await withTransaction(db, async (client) => {
    // A revoked name may be added again (how a leaked token is replaced): a new token and role,
    // the same user row, so its inbox messages and idempotency keys stay its own.
    const res = await client.query<{ reissued: boolean }>(
      `insert into users (name, role, token_hash) values ($1, $2, $3)
       on conflict (name) do update set role = excluded.role, token_hash = excluded.token_hash, revoked_at = null
         where users.revoked_at is not null
       returning (xmax <> 0) as reissued`,
      [name, role, hashToken(token)],
    );
    const row = res.rows[0];
    if (!row)
      throw new ApiError(409, 'conflict', `name: a user named ${name} already exists (revoke it first to issue a new token)`, {
        field: 'name',
      });
    await writeAudit(client, {
      action: 'user.add',
      actor,
      targetType: 'user',
      targetId: name,
      details: row.reissued ? { role, reissued: true } : { role },
    });
    // A reissue replaces the token and maybe the role: nothing cached of the user may outlive it.
    if (row.reissued) await announceTokenChange(client, name);
    return { name, role, token, reissued: row.reissued };
  });
  if (added.reissued) forgetUser(name);
  return { name: added.name, role: added.role, token: added.token };
}

export async function listUsers(db: Queryable): Promise<UserView[]> {
  const res = await db.query<{ name: string; role: Role; created_at: Date; revoked_at: Date | null }>(
    `select name, role, created_at, revoked_at from users order by name`,
  );
  return res.rows.map((r) => ({
    name: r.name,
    role: r.role,
    created_at: r.created_at.toISOString(),
    revoked_at: r.revoked_at?.toISOString() ?? null,
  }));
}

/**
 * Tell every serving process, at commit, to forget the user's cached tokens (src/admin/token-cache.ts):
 * the channel is the schema's (src/db/sql.ts `channels`), read here from the connection's search_path.
 */
async function announceTokenChange(client: Queryable, name: string): Promise<void> {
  await client.query(`select pg_notify(current_schema() || '.acw_users', $1)`, [name]);
}

/**
 * Revoke at once: this process's token caches forget the user at commit, every other serving
 * process on the NOTIFY, so the next request with the token is a 401 (within the cache's 1 s TTL
 * should a NOTIFY be lost). Revoking an already revoked user changes nothing.
 */
export async function revokeUser(db: pg.Pool, name: string, actor: string): Promise<UserView> {
  const n = requireName(name);
  const view = await withTransaction(db, async (client) => {
    const cur = await client.query<{ role: Role; created_at: Date; revoked_at: Date | null }>(
      `select role, created_at, revoked_at from users where name = $1 for update`,
      [n],
    );
    const row = cur.rows[0];
    if (!row) throw new ApiError(404, 'not_found', `name: no user named ${n}`, { field: 'name' });
    let revokedAt = row.revoked_at;
    if (!revokedAt) {
      const upd = await client.query<{ revoked_at: Date }>(`update users set revoked_at = now() where name = $1 returning revoked_at`, [n]);
      revokedAt = upd.rows[0]!.revoked_at;
      await writeAudit(client, { action: 'user.revoke', actor, targetType: 'user', targetId: n, details: { role: row.role } });
      await announceTokenChange(client, n);
    }
    return { name: n, role: row.role, created_at: row.created_at.toISOString(), revoked_at: revokedAt.toISOString() };
  });
  forgetUser(n);
  return view;
}

/** The principal a bearer token belongs to, or null (unknown, empty, malformed or revoked). */
export async function authenticate(db: Queryable, token: string): Promise<Principal | null> {
  // Our tokens are ~48 characters; anything far longer is no token of ours and is not worth hashing.
  if (typeof token !== 'string' || token.length === 0 || token.length > 512) return null;
  return principalOfTokenHash(db, hashToken(token));
}

/** The user holding a token whose SHA-256 (hex) is `hash`, unless revoked. */
export async function principalOfTokenHash(db: Queryable, hash: string): Promise<Principal | null> {
  const res = await db.query<{ id: string; name: string; role: Role; token_hash: string }>({
    name: 'acw_authenticate',
    text: `select id, name, role, token_hash from users where token_hash = $1 and revoked_at is null`,
    values: [hash],
  });
  const row = res.rows[0];
  if (!row) return null;
  // The index lookup found it; the constant-time compare keeps the final check free of timing leaks.
  const a = Buffer.from(row.token_hash, 'hex');
  const b = Buffer.from(hash, 'hex');
  if (a.length !== b.length || !timingSafeEqual(a, b)) return null;
  return { id: String(row.id), name: row.name, role: row.role };
}
