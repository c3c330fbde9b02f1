import type { Queryable } from '../db/pool.js';

/** Every operator action leaves one row naming who did it; written in the action's own transaction. */
export interface AuditEntry {
  action: string;
  actor: string;
  targetType: string;
  targetId: string | null;
  details: Record<string, unknown>;
}

export async function writeAudit(db: Queryable, e: AuditEntry): Promise<number> {
  const res = await db.query<{ id: string }>(
    `insert into audit_log (action, actor, target_type, target_id, details) values ($1, $2, $3, $4, $5::jsonb) returning id`,
    [e.action, e.actor, e.targetType, e.targetId, JSON.stringify(e.details)],
  );
  return Number(res.rows[0]!.id);
}
