import type { Queryable } from '../db/pool.js';
import { ApiError } from '../errors.js';
import { decodeCursor, encodeCursor, iso, requireId, requireLimit } from './params.js';

/**
 * Each user's inbox: the in-app messages an event's recipients and the admins' alerts leave in the
 * `notifications` table, read through `GET /v1/notifications` (the route and its JSON keep that
 * name). Called inbox messages inside the code, apart from `notify`, the public call.
 */

/** One inbox message as its user sees it; each caller sees and marks only their own. */
export interface InboxMessageView {
  id: number;
  topic: string;
  data: unknown;
  read_at: string | null;
  created_at: string;
}

interface Row {
  id: string;
  topic: string;
  data: unknown;
  read_at: Date | null;
  created_at: Date;
}

const toView = (r: Row): InboxMessageView => ({
  id: Number(r.id),
  topic: r.topic,
  data: r.data,
  read_at: iso(r.read_at),
  created_at: r.created_at.toISOString(),
});

/** Newest first, through the (user_id, id desc) index; the cursor is the last id seen. */
export async function listInboxMessages(
  db: Queryable,
  userId: string,
  opts: { limit?: number | undefined; cursor?: string | undefined; unread_only?: boolean | undefined } = {},
): Promise<{ items: InboxMessageView[]; next_cursor: string | null }> {
  const limit = requireLimit(opts.limit, 'limit', 50, 500);
  const before = opts.cursor === undefined ? null : Number(decodeCursor(opts.cursor, [/^\d{1,15}$/])[0]);
  const res = await db.query<Row>(
    `select id, topic, data, read_at, created_at from notifications
     where user_id = $1 and ($2::bigint is null or id < $2) and (not $3 or read_at is null)
     order by id desc limit $4`,
    [userId, before, opts.unread_only === true, limit + 1],
  );
  const rows = res.rows.slice(0, limit);
  const last = rows.at(-1);
  return { items: rows.map(toView), next_cursor: res.rows.length > limit && last ? encodeCursor([last.id]) : null };
}

/** Mark one of the caller's inbox messages read (idempotent); someone else's is a 404, as if absent. */
export async function markInboxMessageRead(db: Queryable, userId: string, id: string | number): Promise<InboxMessageView> {
  const nid = requireId(typeof id === 'number' ? id : String(id), 'id');
  const res = await db.query<Row>(
    `update notifications set read_at = coalesce(read_at, now()) where id = $1 and user_id = $2
     returning id, topic, data, read_at, created_at`,
    [nid, userId],
  );
  const row = res.rows[0];
  if (!row) throw new ApiError(404, 'not_found', `id: no notification ${nid} of yours`, { field: 'id' });
  return toView(row);
}
