import type pg from 'pg';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ApiError } from '../errors.js';
import { advanceKeys, lockKeys, operatorRetryJob } from '../queue/transitions.js';
import { writeAudit } from './audit.js';
import { requireLimit } from './params.js';

/**
 * Blocked ordering keys (docs/operations.md#blocked-keys): a strict endpoint's key whose head went
 * dead waits until an operator retries the head (it is sent again, first) or skips it (it stays
 * dead and the next event of the key goes). Shared by the API and the CLI; each action is audited.
 */

export interface BlockedKey {
  endpoint: string;
  ordering_key: string;
  /** The dead head: `jobs show` it for its attempts. */
  head_job_id: string;
  /** RFC 3339, UTC. */
  blocked_at: string;
  /** The head's last error. */
  last_error: string | null;
  /** Events of the key waiting behind it, counted up to WAITING_CAP. */
  waiting: number;
  waiting_capped: boolean;
}

/** The waiting count of a key reads at most this many entries of its range of job_queue_behind_idx. */
const WAITING_CAP = 10_000;

/** Blocked keys, the longest blocked first, of one endpoint or all (at most `limit`, default 100, 500 at most). */
export async function listBlockedKeys(
  db: Queryable,
  f: { endpoint?: string | undefined; limit?: number | undefined } = {},
): Promise<{ items: BlockedKey[] }> {
  const limit = requireLimit(f.limit, 'limit', 100, 500);
  const res = await db.query<Omit<BlockedKey, 'blocked_at' | 'waiting_capped'> & { blocked_at: Date }>(
    `select o.endpoint, o.ordering_key, o.head as head_job_id, o.blocked_at,
       (select h.last_error from job_history h where h.id = o.head limit 1) as last_error,
       (select count(*)::int from (select 1 from job_queue q where q.status = 'behind' and q.endpoint = o.endpoint
          and q.ordering_key = o.ordering_key limit $3) w) as waiting
     from ordering_keys o
     where o.blocked_at is not null and ($1::text is null or o.endpoint = $1)
     order by o.blocked_at, o.endpoint, o.ordering_key limit $2`,
    [f.endpoint ?? null, limit, WAITING_CAP],
  );
  return { items: res.rows.map((r) => ({ ...r, blocked_at: r.blocked_at.toISOString(), waiting_capped: r.waiting >= WAITING_CAP })) };
}

export interface HeadAction {
  endpoint: string;
  ordering_key: string;
  head_job_id: string;
  action: 'retried' | 'skipped';
}

/**
 * Lock a blocked key; a key that is not blocked (or unknown) is a 404 or 409 naming the field. With
 * `gone`, a key whose head no longer exists in job_queue (a job row deleted by hand rather than
 * cancelled) is taken too: nothing else would move it on.
 */
async function lockBlocked(client: pg.ClientBase, endpoint: string, key: string, gone = false): Promise<string> {
  await lockKeys(client, [{ endpoint, key }]);
  // A statement after the lock: it sees the head the key's last writer committed.
  const res = await client.query<{ head: string | null; blocked: boolean; orphaned: boolean }>(
    `select head, blocked_at is not null as blocked,
       head is not null and not exists (select 1 from job_queue q where q.id = o.head) as orphaned
     from ordering_keys o where endpoint = $1 and ordering_key = $2`,
    [endpoint, key],
  );
  const row = res.rows[0];
  if (!row)
    throw new ApiError(404, 'not_found', `ordering_key: endpoint ${endpoint} has no key ${JSON.stringify(key)}`, { field: 'ordering_key' });
  if (row.head === null || !(row.blocked || (gone && row.orphaned)))
    throw new ApiError(409, 'invalid_state', `ordering_key: the key ${JSON.stringify(key)} of endpoint ${endpoint} is not blocked`, {
      field: 'ordering_key',
    });
  return row.head;
}

/**
 * Retry a blocked key's head: it goes back to pending as a fresh attempt series, still the key's
 * head, and the key is no longer blocked (its next events follow once it is delivered).
 */
export async function retryHead(db: pg.Pool, endpoint: string, key: string, actor: string, jobsChannel: string): Promise<HeadAction> {
  return withTransaction(db, async (client) => {
    const head = await lockBlocked(client, endpoint, key);
    const dead = await client.query(`select 1 from job_history where id = $1 and status = 'dead' for update`, [head]);
    if (dead.rows.length === 0)
      throw new ApiError(409, 'invalid_state', `ordering_key: the head ${head} is no longer kept (past its retention): skip it instead`, {
        field: 'ordering_key',
      });
    await operatorRetryJob(client, head);
    // Its key's head again (operatorRetryJob made it so if it carries the key), and the key goes on.
    await client.query(`update ordering_keys set blocked_at = null, updated_at = now() where endpoint = $1 and ordering_key = $2`, [
      endpoint,
      key,
    ]);
    await client.query(`select pg_notify($1, '')`, [jobsChannel]);
    await writeAudit(client, {
      action: 'ordering.retry_head',
      actor,
      targetType: 'endpoint',
      targetId: endpoint,
      details: { endpoint, ordering_key: key, job_id: head },
    });
    return { endpoint, ordering_key: key, head_job_id: head, action: 'retried' };
  });
}

/**
 * Skip a blocked key's head: it stays dead, and the key's next event goes (or the key is idle). A
 * key whose head was deleted by hand is moved on the same way.
 */
export async function skipHead(db: pg.Pool, endpoint: string, key: string, actor: string, jobsChannel: string): Promise<HeadAction> {
  return withTransaction(db, async (client) => {
    const head = await lockBlocked(client, endpoint, key, true);
    // As a finished head that does not block: the key moves on to its next job, pending.
    await advanceKeys(client, [{ endpoint, key, id: head, dead: false }], jobsChannel, undefined, true);
    await writeAudit(client, {
      action: 'ordering.skip_head',
      actor,
      targetType: 'endpoint',
      targetId: endpoint,
      details: { endpoint, ordering_key: key, job_id: head },
    });
    return { endpoint, ordering_key: key, head_job_id: head, action: 'skipped' };
  });
}
