import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Role } from './config/index.js';
import type { Logger } from './log.js';

/** API principals (roles in config.example.yaml, server.auth.users): tokens shown once, stored as SHA-256, compared in constant time. */
export interface Principal {
  id: string;
  name: string;
  role: Role;
}

/** Tokens are 32 random bytes (256 bits), shown once; only their SHA-256 is stored. */
export function newToken(): string {
  return `acw_${randomBytes(32).toString('base64url')}`;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export interface BootstrapUser {
  readonly name: string;
  readonly role: string;
  readonly token: string;
}

/** Upsert `server.auth.users` at start; a user with an empty token is skipped. */
export async function bootstrapUsers(pool: pg.Pool, users: readonly BootstrapUser[], log: Logger): Promise<void> {
  for (const u of users) {
    if (!u.token) {
      log.debug({ event: 'users.bootstrap_skipped', user: u.name }, 'bootstrap user has an empty token: skipped');
      continue;
    }
    await pool.query(
      `insert into users (name, role, token_hash) values ($1, $2, $3)
       on conflict (name) do update set role = excluded.role, token_hash = excluded.token_hash,
         -- A revoke sticks across restarts; configuring a new token is what grants access again.
         revoked_at = case when users.token_hash = excluded.token_hash then users.revoked_at end`,
      [u.name, u.role, hashToken(u.token)],
    );
  }
}
