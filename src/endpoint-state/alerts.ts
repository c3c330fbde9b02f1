import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { AlertSinks } from '../sinks/outlet.js';
import type { CachedState, CircuitConfig, CircuitState } from './types.js';

/**
 * An endpoint's alerts (docs/operations.md#alerts): the statement that raises one, and the four
 * that come and go with its state, each raised once across processes: the circuit open (after
 * `alert_after`, one alert for all its flaps) and closed again (once it stayed closed
 * `resolve_after`), and failing and no longer failing (docs/operations.md#failing-endpoints).
 */

/** Alert actions about an endpoint as a whole (not one job); each is in ALERT_ACTIONS (src/admin/alert-actions.ts). */
export type EndpointAlertAction =
  | 'endpoint.circuit_opened'
  | 'endpoint.circuit_closed'
  | 'endpoint.expired'
  | 'endpoint.failing'
  | 'endpoint.failing_resolved';

/**
 * Raise one alert about an endpoint: one audit_log row (the exactly-once record that `alerts` and
 * `GET /v1/alerts` read), one inbox message to every admin (topic = the action), a NOTIFY on the
 * alerts channel that only wakes followers, and its deliveries to the alert sinks
 * (docs/operations.md#alert-sinks). Run it inside the transaction whose change the alert reports,
 * so it is raised, and its sinks' jobs written, exactly when that change commits. Returns the audit row id.
 */
export async function raiseEndpointAlert(
  db: Queryable,
  alertsChannel: string,
  alert: { action: EndpointAlertAction; endpoint: string; details: Record<string, unknown> },
  sinks: AlertSinks | null = null,
): Promise<number> {
  const res = await db.query<{ id: string; created_at: Date; details: Record<string, unknown> }>(
    `with a as (
       insert into audit_log (action, actor, target_type, target_id, details)
       values ($1, 'system', 'endpoint', $2, $3::jsonb || jsonb_build_object('endpoint', $2::text))
       returning id, created_at, details),
     n as (
       insert into notifications (user_id, topic, data)
       select u.id, $1, a.details || jsonb_build_object('audit_id', a.id)
       from a cross join users u where u.role = 'admin' and u.revoked_at is null)
     select a.id, a.created_at, a.details, pg_notify($4, a.id::text) from a`,
    [alert.action, alert.endpoint, JSON.stringify(alert.details), alertsChannel],
  );
  const row = res.rows[0]!;
  const id = Number(row.id);
  await sinks?.enqueue(db, [{ id, action: alert.action, createdAt: row.created_at, details: row.details }]);
  return id;
}

/** A resolution alert resolves the alert of its condition, and is resolved from the start itself. */
async function resolveAlert(db: Queryable, alertId: string, byId: number, flaps: number): Promise<void> {
  await db.query(
    `insert into alert_state (alert_id, resolved_at, resolved_by, flaps)
     select t.id, now(), t.by, t.flaps from (values ($1::bigint, $2::bigint, $3::int), ($2::bigint, null, 0)) t(id, by, flaps)
     on conflict (alert_id) do update set resolved_at = coalesce(alert_state.resolved_at, now()),
       resolved_by = coalesce(alert_state.resolved_by, excluded.resolved_by), flaps = excluded.flaps`,
    [alertId, byId, flaps],
  );
}

/** One raised alert, for the log. */
export interface RaisedAlert {
  action: EndpointAlertAction;
  id: number;
  message: string;
}

interface Row {
  circuit: CircuitState;
  open_alert_id: string | null;
  opened_at: Date | null;
  circuit_since: Date;
  next_probe_at: Date | null;
  alert_opened_at: Date | null;
  alert_flaps: number;
  alert_held: number;
  last_error: string | null;
  consecutive_failures: number;
  failing: boolean;
  failing_since: Date | null;
  failing_codes: number[];
  failing_dead: number;
  failing_alert_id: string | null;
  open_for_ms: number | null;
  since_ms: number;
  db_now: Date;
}

const iso = (d: Date | null): string | null => d?.toISOString() ?? null;

/**
 * One endpoint's owed alerts, in the transaction that marks its row, so each is raised exactly
 * once across processes (a row another process holds is skipped; it raises them).
 */
export async function settleEndpointAlerts(
  pool: pg.Pool,
  alertsChannel: string,
  name: string,
  c: CircuitConfig,
  sinks: AlertSinks | null = null,
): Promise<RaisedAlert[]> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const res = await client.query<Row>(
      `select circuit, open_alert_id, opened_at, circuit_since, next_probe_at, alert_opened_at, alert_flaps, alert_held,
         last_error, consecutive_failures, failing, failing_since, failing_codes, failing_dead, failing_alert_id, now() as db_now,
         (extract(epoch from now() - coalesce(alert_opened_at, opened_at)) * 1000)::float8 as open_for_ms,
         (extract(epoch from now() - circuit_since) * 1000)::float8 as since_ms
       from endpoint_state where endpoint = $1 for update skip locked`,
      [name],
    );
    const r = res.rows[0];
    const raised: RaisedAlert[] = [];
    const raise = async (action: EndpointAlertAction, details: Record<string, unknown>, message: string): Promise<number> => {
      const id = await raiseEndpointAlert(client, alertsChannel, { action, endpoint: name, details }, sinks);
      raised.push({ action, id, message });
      return id;
    };
    if (r && r.circuit !== 'closed' && r.open_alert_id === null && r.open_for_ms !== null && r.open_for_ms >= c.alert_after) {
      const id = await raise(
        'endpoint.circuit_opened',
        {
          opened_at: iso(r.alert_opened_at ?? r.opened_at),
          open_for_ms: Math.round(r.open_for_ms),
          flaps: r.alert_flaps,
          last_error: r.last_error,
          consecutive_failures: r.consecutive_failures,
          next_probe_at: iso(r.next_probe_at),
        },
        `endpoint ${name} has been down since ${iso(r.alert_opened_at ?? r.opened_at)}`,
      );
      await client.query(
        `update endpoint_state set open_alert_id = $2, alert_opened_at = coalesce(alert_opened_at, opened_at), updated_at = now()
         where endpoint = $1`,
        [name, id],
      );
    } else if (r && r.circuit === 'closed' && r.open_alert_id !== null && r.since_ms >= c.resolve_after) {
      const downtime = r.alert_opened_at ? r.circuit_since.getTime() - r.alert_opened_at.getTime() : null;
      const id = await raise(
        'endpoint.circuit_closed',
        {
          open_alert_id: Number(r.open_alert_id),
          opened_at: iso(r.alert_opened_at),
          closed_at: iso(r.circuit_since),
          downtime_ms: downtime,
          flaps: r.alert_flaps,
          held_deliveries: r.alert_held,
        },
        `endpoint ${name} has recovered after ${downtime === null ? '?' : Math.round(downtime / 1000)} s down`,
      );
      await resolveAlert(client, r.open_alert_id, id, r.alert_flaps);
      await client.query(
        `update endpoint_state set open_alert_id = null, alert_opened_at = null, alert_flaps = 0, alert_held = 0, updated_at = now()
         where endpoint = $1`,
        [name],
      );
    }
    if (r && r.failing && r.failing_alert_id === null) {
      const id = await raise(
        'endpoint.failing',
        { since: iso(r.failing_since), status_codes: r.failing_codes, min_attempts: c.min_attempts },
        `endpoint ${name} is failing: at least half of its last ${c.min_attempts} deliveries were refused (${r.failing_codes.join(', ')})`,
      );
      await client.query(`update endpoint_state set failing_alert_id = $2, updated_at = now() where endpoint = $1`, [name, id]);
    } else if (r && !r.failing && r.failing_alert_id !== null) {
      const since = r.failing_since ?? null;
      const id = await raise(
        'endpoint.failing_resolved',
        {
          failing_alert_id: Number(r.failing_alert_id),
          since: iso(since),
          until: iso(r.db_now),
          status_codes: r.failing_codes,
          dead_jobs: r.failing_dead,
        },
        `endpoint ${name} is no longer failing; ${r.failing_dead} of its jobs went dead meanwhile`,
      );
      await resolveAlert(client, r.failing_alert_id, id, 0);
      await client.query(
        `update endpoint_state set failing_alert_id = null, failing_since = null, failing_dead = 0, updated_at = now() where endpoint = $1`,
        [name],
      );
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

/** When an alert falls due for this cached state (this process's clock); null: none is owed. */
export function alertDueAt(s: CachedState, c: CircuitConfig): number | null {
  if (s.failing !== (s.failingAlertId !== null)) return 0;
  if (s.circuit !== 'closed' && s.openAlertId === null && s.openedAt !== null) return s.openedAt + c.alert_after;
  if (s.circuit === 'closed' && s.openAlertId !== null) return (s.circuitSince ?? 0) + c.resolve_after;
  return null;
}

/**
 * Raise the alerts owed now (settleEndpointAlerts: each in the transaction that marks its row, so
 * exactly once across processes). Answers whether any was owed (the cache is then stale).
 */
export async function raiseOwedAlerts(
  pool: pg.Pool,
  alertsChannel: string,
  cache: ReadonlyMap<string, CachedState>,
  c: CircuitConfig,
  log: Logger,
  sinks: AlertSinks | null = null,
): Promise<boolean> {
  const now = Date.now();
  const owed = [...cache].filter(([, s]) => {
    const at = alertDueAt(s, c);
    return at !== null && at <= now;
  });
  if (owed.length === 0) return false;
  for (const [name] of owed.toSorted(([a], [b]) => (a < b ? -1 : 1))) {
    for (const a of await settleEndpointAlerts(pool, alertsChannel, name, c, sinks)) {
      const fields = { event: 'endpoint.alert', endpoint: name, action: a.action, alert_id: a.id };
      if (a.action === 'endpoint.circuit_closed' || a.action === 'endpoint.failing_resolved') log.info(fields, a.message);
      else log.warn(fields, a.message);
    }
  }
  return true;
}
