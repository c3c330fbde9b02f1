import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import { ApiError } from '../errors.js';
import { CONDITION_ACTIONS } from './alert-actions.js';
import { IS_ALERT, latestAlertId, parseAlertActions, readAlert, type AlertView } from './alerts.js';
import { writeAudit } from './audit.js';
import { requireId } from './params.js';

/**
 * Acknowledging alerts (docs/operations.md#alerts): one by one or all up to an id, through the
 * API and `alerts --ack`. Acknowledging says someone has seen it; it resolves an alert that
 * nothing else resolves (a dead letter, an expiry), never one whose condition still lasts (a
 * circuit still open, an endpoint still failing): that one resolves when its condition ends.
 * Each call writes one audit row naming who acknowledged.
 */

/** The upsert of alert_state for the alerts `pick` selects (columns id, action), skipping those acknowledged already. */
const ACK_SQL = (pick: string): string => `with p as (${pick}),
  up as (
    insert into alert_state (alert_id, acknowledged_at, acknowledged_by, resolved_at)
    select p.id, now(), $1, case when p.action = any($2::text[]) then null else now() end from p
    on conflict (alert_id) do update set acknowledged_at = excluded.acknowledged_at, acknowledged_by = excluded.acknowledged_by,
      resolved_at = coalesce(alert_state.resolved_at, excluded.resolved_at)
    where alert_state.acknowledged_at is null
    returning alert_id)
  select count(*)::int as n from up`;

/** Acknowledge one alert (a repeat changes nothing); a 404 naming `id` when there is no such alert. */
export async function acknowledgeAlert(pool: pg.Pool, id: number | string, actor: string): Promise<AlertView> {
  const alertId = requireId(id, 'id');
  await withTransaction(pool, async (client) => {
    const found = await client.query<{ action: string }>(`select action from audit_log where ${IS_ALERT} and id = $1`, [alertId]);
    if (found.rows.length === 0) throw new ApiError(404, 'not_found', `id: no alert ${alertId}`, { field: 'id' });
    const res = await client.query<{ n: number }>(ACK_SQL(`select id, action from audit_log where ${IS_ALERT} and id = $3`), [
      actor,
      CONDITION_ACTIONS,
      alertId,
    ]);
    if (res.rows[0]!.n > 0) {
      await writeAudit(client, { action: 'alert.acknowledged', actor, targetType: 'alert', targetId: String(alertId), details: {} });
    }
  });
  return readAlert(pool, alertId);
}

/**
 * Acknowledge every alert not yet acknowledged up to `upTo` (default: the newest now, so one raised
 * while the operator reads is not acknowledged unseen), of `action` if given. Answers how many.
 */
export async function acknowledgeAlerts(
  pool: pg.Pool,
  opts: { upTo?: number | undefined; action?: string | readonly string[] | undefined },
  actor: string,
): Promise<{ acknowledged: number; up_to: number }> {
  const actions = opts.action === undefined ? null : parseAlertActions(opts.action, 'action');
  const upTo = opts.upTo === undefined ? await latestAlertId(pool) : requireId(opts.upTo, 'up_to');
  const acknowledged = await withTransaction(pool, async (client) => {
    const res = await client.query<{ n: number }>(
      ACK_SQL(`select id, action from audit_log where ${IS_ALERT} and id <= $3 and ($4::text[] is null or action = any($4::text[]))`),
      [actor, CONDITION_ACTIONS, upTo, actions],
    );
    const n = res.rows[0]!.n;
    if (n > 0) {
      await writeAudit(client, {
        action: 'alert.acknowledged',
        actor,
        targetType: 'alert',
        targetId: null,
        details: { up_to: upTo, count: n, ...(actions ? { actions } : {}) },
      });
    }
    return n;
  });
  return { acknowledged, up_to: upTo };
}
