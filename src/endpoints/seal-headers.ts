/**
 * Header values stored before migrations/0009_sealed_headers.sql are plain text; SQL cannot seal
 * them (the key lives in the processes, never in the database), so a process with the key does it
 * once, at start or when it meets such a row (docs/operations.md#secrets-at-rest). Until then the
 * plain values keep working (./rows.ts toEndpoint).
 */
import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import { sealHeaders, type SecretCodec } from './codec.js';

/** The lock that lets one process seal at a time (two-int advisory lock: this class, the schema's hash). */
export const SEAL_LOCK_CLASS = 0x61637773; // "acws"

export interface SealResult {
  /** false: another process held the lock (and seals them); nothing was done here. */
  ran: boolean;
  /** The endpoints whose header values were sealed now. */
  sealed: string[];
}

/**
 * Seal every unsealed row's header values, in one transaction under an advisory lock: a process
 * that finds the lock taken leaves the work to its holder. Each row is re-checked under its row
 * lock (`not headers_sealed`), so a value is never sealed twice, whatever a PATCH did meanwhile.
 */
export async function sealPlainHeaders(pool: pg.Pool, codec: SecretCodec): Promise<SealResult> {
  return withTransaction(pool, async (client) => {
    const lock = await client.query<{ ok: boolean }>(`select pg_try_advisory_xact_lock($1, hashtext(current_schema())) as ok`, [
      SEAL_LOCK_CLASS,
    ]);
    if (!lock.rows[0]?.ok) return { ran: false, sealed: [] };
    const rows = await client.query<{ name: string; headers: Record<string, string> }>(
      `select name, headers from endpoints where not headers_sealed order by name for update`,
    );
    const sealed: string[] = [];
    for (const r of rows.rows) {
      // updated_at is left alone: the endpoint is the same, so no process needs to re-read it.
      await client.query(`update endpoints set headers = $2::jsonb, headers_sealed = true where name = $1 and not headers_sealed`, [
        r.name,
        JSON.stringify(sealHeaders(codec, r.name, r.headers)),
      ]);
      sealed.push(r.name);
    }
    return { ran: true, sealed };
  });
}
