import type { Queryable } from '../db/pool.js';

/** Alert actions about an endpoint as a whole (not one job); each is in ALERT_ACTIONS (src/admin/alerts.ts). */
export type EndpointAlertAction = 'endpoint.circuit_opened' | 'endpoint.circuit_closed' | 'endpoint.expired';

/**
 * Raise one alert about an endpoint: one audit_log row (the exactly-once record that `alerts` and
 * `GET /v1/alerts` read), one in-app notification to every admin (topic = the action), and a NOTIFY
 * on the alerts channel that only wakes followers. Run it inside the transaction whose change the
 * alert reports, so it is raised exactly when that change commits. Returns the audit row id.
 */
export async function raiseEndpointAlert(
  db: Queryable,
  alertsChannel: string,
  alert: { action: EndpointAlertAction; endpoint: string; details: Record<string, unknown> },
): Promise<number> {
  const res = await db.query<{ id: string }>(
    `with a as (
       insert into audit_log (action, actor, target_type, target_id, details)
       values ($1, 'system', 'endpoint', $2, $3::jsonb || jsonb_build_object('endpoint', $2::text))
       returning id, details),
     n as (
       insert into notifications (user_id, topic, data)
       select u.id, $1, a.details || jsonb_build_object('audit_id', a.id)
       from a cross join users u where u.role = 'admin' and u.revoked_at is null)
     select a.id, pg_notify($4, a.id::text) from a`,
    [alert.action, alert.endpoint, JSON.stringify(alert.details), alertsChannel],
  );
  return Number(res.rows[0]!.id);
}
