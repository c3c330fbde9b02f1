import { DoublingDelay, Wakeup } from '../delay.js';
import { ApiError, badField, coerceError } from '../errors.js';
import { listenOn } from '../db/listen-hub.js';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import { ALERT_ACTIONS, type AlertAction } from './alert-actions.js';
import { decodeCursor, encodeCursor, requireId, requireLimit } from './params.js';

/**
 * Alerts (docs/operations.md#alerts) read from `audit_log`, the exactly-once record. The NOTIFY on the
 * alerts channel only wakes followers, who then re-read from their last id, so a follower that
 * was away (or whose LISTEN connection dropped) misses nothing. The kinds are ALERT_ACTIONS
 * (./alert-actions.ts).
 */
export { ALERT_ACTIONS, type AlertAction } from './alert-actions.js';
// Inlined (code constants, never input) so the planner matches the partial index audit_log_alerts_idx.
export const IS_ALERT = `action in (${ALERT_ACTIONS.map((a) => `'${a}'`).join(', ')})`;

const isAlertAction = (s: string): s is AlertAction => (ALERT_ACTIONS as readonly string[]).includes(s);

/**
 * The `action` filter: one action or several, each value possibly comma-separated (`?action=a&action=b`,
 * `?action=a,b`, `--action a,b`). An unknown action is refused naming `field`; duplicates are dropped.
 */
export function parseAlertActions(value: unknown, field: string): AlertAction[] {
  const values = Array.isArray(value) ? (value as unknown[]) : [value];
  const out = new Set<AlertAction>();
  for (const v of values) {
    if (typeof v !== 'string') throw badField(field, `expected alert actions, one of ${ALERT_ACTIONS.join(', ')}`);
    for (const part of v.split(',')) {
      const a = part.trim();
      if (!isAlertAction(a)) {
        const shown = JSON.stringify(a.length > 60 ? `${a.slice(0, 60)}…` : a);
        throw badField(field, `unknown alert action ${shown}, expected one of ${ALERT_ACTIONS.join(', ')}`);
      }
      out.add(a);
    }
  }
  if (out.size === 0) throw badField(field, `expected alert actions, one of ${ALERT_ACTIONS.join(', ')}`);
  return [...out];
}

/** Only these actions (null: every alert). A caller with a flag of its own (the CLI's --action) checks it first, naming it. */
const actionFilter = (value: unknown): AlertAction[] | null => (value === undefined ? null : parseAlertActions(value, 'action'));

/** An alert: its audit row id, action and time, and what became of it, over the details its action records. */
export interface AlertView {
  id: number;
  action: AlertAction;
  created_at: string;
  /** open until resolved: by the alert that says its condition ended, or (one with no such alert) when acknowledged. */
  state: 'open' | 'resolved';
  resolved_at: string | null;
  /** The alert that resolved it (an `endpoint.circuit_closed` or `endpoint.failing_resolved`); null otherwise. */
  resolved_by: number | null;
  acknowledged_at: string | null;
  acknowledged_by: string | null;
  /** How many more times its condition began while it stood (a circuit that opened again): one alert for them all. */
  flaps: number;
  /**
   * A dead letter: job_id, type, endpoint, topic, event_id, attempts, reason, last_error. An endpoint
   * alert (src/endpoint-state/alerts.ts): endpoint, and what its action records.
   */
  [detail: string]: unknown;
}

interface AlertRow {
  id: string;
  action: AlertAction;
  created_at: Date;
  details: Record<string, unknown> | null;
  resolved_at: Date | null;
  resolved_by: string | null;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
  flaps: number;
}

function toView(r: AlertRow): AlertView {
  return {
    ...r.details,
    id: Number(r.id),
    action: r.action,
    created_at: r.created_at.toISOString(),
    state: r.resolved_at === null ? 'open' : 'resolved',
    resolved_at: r.resolved_at?.toISOString() ?? null,
    resolved_by: r.resolved_by === null ? null : Number(r.resolved_by),
    acknowledged_at: r.acknowledged_at?.toISOString() ?? null,
    acknowledged_by: r.acknowledged_by,
    flaps: r.flaps,
  };
}

/**
 * An alert row with what became of it (alert_state), and the live flaps of a circuit alert that
 * still stands (its endpoint's row names it). `$S` and `$A` are the state and acknowledged filters.
 */
const ALERT_FROM = `select a.id, a.action, a.created_at, a.details, st.resolved_at, st.resolved_by, st.acknowledged_at,
    st.acknowledged_by, coalesce(es.alert_flaps, st.flaps, 0) as flaps
  from audit_log a left join alert_state st on st.alert_id = a.id
  left join lateral (select e.alert_flaps from endpoint_state e where e.open_alert_id = a.id limit 1) es on true`;
const stateFilter = (state: number, acked: number): string =>
  `($${state}::text is null or ($${state}::text = 'open') = (st.resolved_at is null))
   and ($${acked}::boolean is null or (st.acknowledged_at is not null) = $${acked}::boolean)`;

/** The filters of what became of an alert: `state` open or resolved, `acknowledged` true or false. */
export interface AlertStateFilter {
  state?: 'open' | 'resolved' | undefined;
  acknowledged?: boolean | undefined;
}

/**
 * Alerts with id > sinceId, oldest first. Without sinceId: the most recent `limit` (still oldest
 * first), which is what `acw-webhooks alerts` prints. `action`: only those actions.
 */
export async function readAlerts(
  db: Queryable,
  opts: {
    sinceId?: number | undefined;
    limit?: number | undefined;
    action?: string | readonly string[] | undefined;
  } & AlertStateFilter = {},
): Promise<AlertView[]> {
  const limit = requireLimit(opts.limit, 'limit', 100, 1000);
  const actions = actionFilter(opts.action);
  const st = [opts.state ?? null, opts.acknowledged ?? null];
  if (opts.sinceId === undefined) {
    const res = await db.query<AlertRow>(
      `select * from (${ALERT_FROM}
                      where ${IS_ALERT} and ($1::text[] is null or action = any($1)) and ${stateFilter(3, 4)}
                      order by a.id desc limit $2) r
       order by id`,
      [actions, limit, ...st],
    );
    return res.rows.map(toView);
  }
  const since = requireId(opts.sinceId, 'since');
  const res = await db.query<AlertRow>(
    `${ALERT_FROM}
     where ${IS_ALERT} and ($1::text[] is null or action = any($1)) and a.id > $2 and ${stateFilter(4, 5)} order by a.id limit $3`,
    [actions, since, limit, ...st],
  );
  return res.rows.map(toView);
}

/** One alert by id; a 404 naming `id` when there is none. */
export async function readAlert(db: Queryable, id: number | string): Promise<AlertView> {
  const res = await db.query<AlertRow>(`${ALERT_FROM} where ${IS_ALERT} and a.id = $1`, [requireId(id, 'id')]);
  const row = res.rows[0];
  if (!row) throw new ApiError(404, 'not_found', `id: no alert ${String(id)}`, { field: 'id' });
  return toView(row);
}

/**
 * `GET /v1/alerts`: newest first with a keyset cursor (the last id seen), as `GET /v1/notifications`
 * pages, so paging stays stable while new alerts arrive.
 */
export async function listAlerts(
  db: Queryable,
  f: { limit?: number | undefined; cursor?: string | undefined; action?: string | readonly string[] | undefined } & AlertStateFilter = {},
): Promise<{ items: AlertView[]; next_cursor: string | null }> {
  const limit = requireLimit(f.limit, 'limit', 50, 500);
  const actions = actionFilter(f.action);
  const before = f.cursor === undefined ? null : Number(decodeCursor(f.cursor, [/^\d{1,15}$/])[0]);
  const res = await db.query<AlertRow>(
    `${ALERT_FROM}
     where ${IS_ALERT} and ($1::text[] is null or action = any($1)) and ($2::bigint is null or a.id < $2) and ${stateFilter(4, 5)}
     order by a.id desc limit $3`,
    [actions, before, limit + 1, f.state ?? null, f.acknowledged ?? null],
  );
  const rows = res.rows.slice(0, limit);
  const last = rows.at(-1);
  return { items: rows.map(toView), next_cursor: res.rows.length > limit && last ? encodeCursor([last.id]) : null };
}

/** The newest alert id now (0 when none): where a follower without sinceId starts. */
export async function latestAlertId(db: Queryable): Promise<number> {
  const res = await db.query<{ id: string | null }>(`select max(id) as id from audit_log where ${IS_ALERT}`);
  return Number(res.rows[0]?.id ?? 0);
}

export interface PumpOptions {
  pool: Queryable;
  /** Replay alerts after this id; absent: start `backlog` alerts back from the newest now. */
  sinceId?: number | undefined;
  /** Without sinceId: how many of the newest alerts to pass on first, as `tail -f` does. Default 0. */
  backlog?: number | undefined;
  /** Only these actions (checked as `action`; callers with a flag of their own check it first). */
  action?: string | readonly string[] | undefined;
  signal: AbortSignal;
  /** Awaited before the next alert, so a slow consumer is not overrun. */
  onAlert: (alert: AlertView) => void | Promise<void>;
  /** Registers the wake-up (a NOTIFY or a reconnect); returns the unsubscribe. */
  subscribe: (wake: () => void) => () => void;
  /** Re-read this often even with no wake-up: the net under a lost NOTIFY. Default 5 s. */
  pollMs?: number;
  /** Checked before every read; false ends the follow (e.g. the caller's user was revoked). */
  stillAllowed?: () => Promise<boolean>;
  log?: Logger;
}

/** Where a follower without sinceId starts: just before the `backlog`-th newest alert (the newest now when 0). */
async function startingPoint(db: Queryable, backlog: number, action: PumpOptions['action']): Promise<number> {
  if (backlog === 0) return latestAlertId(db);
  const recent = await readAlerts(db, { limit: backlog, action });
  return recent.length === 0 ? 0 : recent[0]!.id - 1;
}

/** The follow loop, with wake-ups from any source (a subscription per follower, or one shared by many). */
export async function pumpAlerts(o: PumpOptions): Promise<void> {
  // Checked before subscribing, so a bad filter is refused and nothing is left listening.
  const action = o.action === undefined ? undefined : parseAlertActions(o.action, 'action');
  // Pending from the start: the first read happens at once.
  const wakeup = new Wakeup({ pending: true });
  const unsubscribe = o.subscribe(() => wakeup.wake());
  const onAbort = (): void => wakeup.wake();
  o.signal.addEventListener('abort', onAbort);
  const onError = new DoublingDelay(100, 5_000);
  try {
    // Subscribed first, then the starting point read: an alert committed in between is still seen.
    let cursor = o.sinceId ?? (await startingPoint(o.pool, o.backlog ?? 0, action));
    while (!o.signal.aborted) {
      // Woken, or the poll came round: read either way.
      await wakeup.wait(o.pollMs ?? 5_000);
      if (o.signal.aborted) return;
      let batch: AlertView[];
      try {
        if (o.stillAllowed && !(await o.stillAllowed())) return;
        batch = await readAlerts(o.pool, { sinceId: cursor, limit: 500, action });
        onError.reset();
      } catch (err) {
        if (o.signal.aborted) return;
        o.log?.warn({ event: 'alerts.read_error', err: coerceError(err).message }, 'reading alerts failed; retrying');
        await new Promise((r) => setTimeout(r, onError.next()));
        wakeup.wake();
        continue;
      }
      for (const a of batch) {
        if (o.signal.aborted) return;
        await o.onAlert(a);
        cursor = a.id;
      }
      // A full batch: there may be more.
      if (batch.length === 500) wakeup.wake();
    }
  } finally {
    o.signal.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}

export interface FollowOptions {
  pool: Queryable;
  /** For the LISTEN connection of its own. */
  url: string;
  /** The alerts NOTIFY channel (`channels(schema).alerts`). */
  channel: string;
  sinceId?: number | undefined;
  /** Without sinceId: how many past alerts to pass on first (`alerts --follow` gives 10). */
  backlog?: number | undefined;
  action?: string | readonly string[] | undefined;
  signal: AbortSignal;
  onAlert: (alert: AlertView) => void | Promise<void>;
  log?: Logger;
  pollMs?: number;
}

/**
 * `acw-webhooks alerts --follow`: replay from sinceId (or the last `backlog` alerts), then LISTEN and re-read after every NOTIFY
 * and every reconnect. Resolves when `signal` aborts.
 */
export async function followAlerts(opts: FollowOptions): Promise<void> {
  // A bad filter is refused before a LISTEN connection opens.
  if (opts.action !== undefined) parseAlertActions(opts.action, 'action');
  let wake: (() => void) | null = null;
  // A process of its own (the CLI): a LISTEN connection of its own, closed with the subscription.
  const listening = await listenOn(undefined, { url: opts.url, log: opts.log }, opts.channel, {
    onNotify: () => wake?.(),
    onReconnect: () => wake?.(),
  });
  try {
    await pumpAlerts({
      pool: opts.pool,
      sinceId: opts.sinceId,
      backlog: opts.backlog,
      action: opts.action,
      signal: opts.signal,
      onAlert: opts.onAlert,
      subscribe: (w) => {
        wake = w;
        return () => (wake = null);
      },
      ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
      ...(opts.log ? { log: opts.log } : {}),
    });
  } finally {
    await listening.close();
  }
}
