import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { CachedState, CircuitState } from './types.js';

/**
 * An endpoint's alerts (docs/operations.md#alerts): the statement that raises one, and the
 * circuit's two, open too long and recovered, each raised once across processes.
 */

/** Alert actions about an endpoint as a whole (not one job); each is in ALERT_ACTIONS (src/admin/alerts.ts). */
export type EndpointAlertAction = 'endpoint.circuit_opened' | 'endpoint.circuit_closed' | 'endpoint.expired';

/**
 * Raise one alert about an endpoint: one audit_log row (the exactly-once record that `alerts` and
 * `GET /v1/alerts` read), one inbox message to every admin (topic = the action), and a NOTIFY
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

/** What settleCircuitAlert raised, if anything. */
export type RaisedAlert =
  | { action: 'endpoint.circuit_opened'; id: number; openedAt: Date | null }
  | { action: 'endpoint.circuit_closed'; id: number };

/**
 * One endpoint's owed alert, in the transaction that marks its row, so it is raised exactly once
 * across processes: open longer than `alertAfterMs` and not yet alerted -> `endpoint.circuit_opened`;
 * closed with that alert raised -> `endpoint.circuit_closed`. A row another process holds is skipped.
 */
export async function settleCircuitAlert(
  pool: pg.Pool,
  alertsChannel: string,
  name: string,
  alertAfterMs: number,
): Promise<RaisedAlert | null> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const row = await client.query<{
      circuit: CircuitState;
      open_alert_id: string | null;
      opened_at: Date | null;
      last_error: string | null;
      consecutive_failures: number;
      open_for_ms: number | null;
    }>(
      `select circuit, open_alert_id, opened_at, last_error, consecutive_failures,
         (extract(epoch from now() - opened_at) * 1000)::float8 as open_for_ms
       from endpoint_state where endpoint = $1 for update skip locked`,
      [name],
    );
    const r = row.rows[0];
    let raised: RaisedAlert | null = null;
    if (r && r.circuit !== 'closed' && r.open_alert_id === null && r.open_for_ms !== null && r.open_for_ms >= alertAfterMs) {
      const id = await raiseEndpointAlert(client, alertsChannel, {
        action: 'endpoint.circuit_opened',
        endpoint: name,
        details: {
          opened_at: r.opened_at?.toISOString() ?? null,
          open_for_ms: Math.round(r.open_for_ms),
          last_error: r.last_error,
          consecutive_failures: r.consecutive_failures,
        },
      });
      await client.query(`update endpoint_state set open_alert_id = $2, updated_at = now() where endpoint = $1`, [name, id]);
      raised = { action: 'endpoint.circuit_opened', id, openedAt: r.opened_at };
    } else if (r && r.circuit === 'closed' && r.open_alert_id !== null) {
      const id = await raiseEndpointAlert(client, alertsChannel, {
        action: 'endpoint.circuit_closed',
        endpoint: name,
        details: { open_alert_id: Number(r.open_alert_id) },
      });
      await client.query(`update endpoint_state set open_alert_id = null, updated_at = now() where endpoint = $1`, [name]);
      raised = { action: 'endpoint.circuit_closed', id };
    }
    await client.query('commit');
    return raised;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * An endpoint open longer than alert_after raises one alert; once closed again, one recovery
 * alert if the first was raised. Each happens in the transaction that marks the row
 * (settleCircuitAlert), so exactly once across processes. Answers whether any was owed (the cache
 * is then stale).
 */
export async function raiseOwedAlerts(
  pool: pg.Pool,
  alertsChannel: string,
  cache: ReadonlyMap<string, CachedState>,
  alertAfterMs: number,
  log: Logger,
): Promise<boolean> {
  const now = Date.now();
  const owed = [...cache].filter(
    ([, s]) =>
      (s.circuit !== 'closed' && s.openAlertId === null && s.openedAt !== null && s.openedAt + alertAfterMs <= now) ||
      (s.circuit === 'closed' && s.openAlertId !== null),
  );
  if (owed.length === 0) return false;
  for (const [name] of owed.toSorted(([a], [b]) => (a < b ? -1 : 1))) {
    const raised = await settleCircuitAlert(pool, alertsChannel, name, alertAfterMs);
    if (raised?.action === 'endpoint.circuit_opened') {
      log.warn(
        { event: 'endpoint.alert', endpoint: name, action: raised.action, alert_id: raised.id },
        `endpoint ${name} has been down since ${raised.openedAt?.toISOString()}`,
      );
    } else if (raised) {
      log.info({ event: 'endpoint.alert', endpoint: name, action: raised.action, alert_id: raised.id }, `endpoint ${name} has recovered`);
    }
  }
  return true;
}
