import { DoublingDelay, Wakeup } from '../delay.js';
import { coerceError } from '../errors.js';
import { Listener } from '../db/listener.js';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import { requireId, requireLimit } from './params.js';

/**
 * Dead-letter alerts (docs/operations.md#dead-letter) read from `audit_log`, the exactly-once record. The NOTIFY on the
 * alerts channel only wakes followers, who then re-read from their last id, so a follower that
 * was away (or whose LISTEN connection dropped) misses nothing.
 *
 * A new alert kind needs a migration that recreates the partial index audit_log_alerts_idx over the
 * same list, in the same change: a query over an action the index lacks no longer uses it. A test
 * (test/admin/alert-index.test.ts) compares this list with the index in a migrated database.
 */
export const ALERT_ACTIONS = [
  'webhook.dead_letter',
  'job.dead_letter',
  'endpoint.circuit_opened',
  'endpoint.circuit_closed',
  'endpoint.expired',
] as const;
// Inlined (code constants, never input) so the planner matches the partial index audit_log_alerts_idx.
const IS_ALERT = `action in (${ALERT_ACTIONS.map((a) => `'${a}'`).join(', ')})`;

export interface AlertView {
  id: number;
  action: string;
  created_at: string;
  /** The dead-letter details: job_id, type, endpoint, topic, event_id, attempts, reason, last_error. */
  [detail: string]: unknown;
}

interface AlertRow {
  id: string;
  action: string;
  created_at: Date;
  details: Record<string, unknown> | null;
}

function toView(r: AlertRow): AlertView {
  return { ...r.details, id: Number(r.id), action: r.action, created_at: r.created_at.toISOString() };
}

/**
 * Alerts with id > sinceId, oldest first. Without sinceId: the most recent `limit` (still oldest
 * first), which is what `acw-webhooks alerts` prints.
 */
export async function readAlerts(
  db: Queryable,
  opts: { sinceId?: number | undefined; limit?: number | undefined } = {},
): Promise<AlertView[]> {
  const limit = requireLimit(opts.limit, 'limit', 100, 1000);
  if (opts.sinceId === undefined) {
    const res = await db.query<AlertRow>(
      `select * from (select id, action, created_at, details from audit_log where ${IS_ALERT} order by id desc limit $1) r
       order by id`,
      [limit],
    );
    return res.rows.map(toView);
  }
  const since = requireId(opts.sinceId, 'since');
  const res = await db.query<AlertRow>(
    `select id, action, created_at, details from audit_log where ${IS_ALERT} and id > $1 order by id limit $2`,
    [since, limit],
  );
  return res.rows.map(toView);
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
async function startingPoint(db: Queryable, backlog: number): Promise<number> {
  if (backlog === 0) return latestAlertId(db);
  const recent = await readAlerts(db, { limit: backlog });
  return recent.length === 0 ? 0 : recent[0]!.id - 1;
}

/** The follow loop, with wake-ups from any source (one Listener per follower, or one shared by many). */
export async function pumpAlerts(o: PumpOptions): Promise<void> {
  // Pending from the start: the first read happens at once.
  const wakeup = new Wakeup({ pending: true });
  const unsubscribe = o.subscribe(() => wakeup.wake());
  const onAbort = (): void => wakeup.wake();
  o.signal.addEventListener('abort', onAbort);
  const onError = new DoublingDelay(100, 5_000);
  try {
    // Subscribed first, then the starting point read: an alert committed in between is still seen.
    let cursor = o.sinceId ?? (await startingPoint(o.pool, o.backlog ?? 0));
    while (!o.signal.aborted) {
      // Woken, or the poll came round: read either way.
      await wakeup.wait(o.pollMs ?? 5_000);
      if (o.signal.aborted) return;
      let batch: AlertView[];
      try {
        if (o.stillAllowed && !(await o.stillAllowed())) return;
        batch = await readAlerts(o.pool, { sinceId: cursor, limit: 500 });
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
  let wake: (() => void) | null = null;
  const listener = new Listener({
    url: opts.url,
    channels: [opts.channel],
    ...(opts.log ? { log: opts.log } : {}),
    onNotify: () => wake?.(),
    onReconnect: () => wake?.(),
  });
  await listener.start();
  try {
    await pumpAlerts({
      pool: opts.pool,
      sinceId: opts.sinceId,
      backlog: opts.backlog,
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
    await listener.close();
  }
}
