import type pg from 'pg';
import {
  addUser,
  cancelJob,
  followAlerts,
  getJob,
  listJobs,
  listUsers,
  readAlerts,
  redriveJobs,
  retryJob,
  revokeUser,
} from '../../admin/index.js';
import { acknowledgeAlert, acknowledgeAlerts } from '../../admin/alert-acks.js';
import { parseAlertActions, type AlertAction } from '../../admin/alerts.js';
import { parseDuration } from '../../config/index.js';
import { channels } from '../../db/sql.js';
import type { Logger } from '../../log.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, type CliIo } from '../io.js';
import { ALERTS_LIST_DEFAULT, ALERTS_TAIL_DEFAULT } from '../options.js';
import { watchForStop } from '../stop.js';

/** Operator commands act as this principal in audit_log: the OS user running them. */
export function actor(io: CliIo): string {
  return `cli:${io.env.USER ?? io.env.LOGNAME ?? 'unknown'}`;
}

/** Run an admin operation against the configured database (its refusals become exit codes in main). */
async function admin<T>(
  io: CliIo,
  o: GlobalOptions,
  fn: (ctx: { pool: pg.Pool; url: string; jobsChannel: string; alertsChannel: string; log: Logger }) => Promise<T>,
): Promise<T> {
  const config = readConfig(io, o, { needSecrets: false }); // none of these delivers
  return withDatabase(io, config, async (db, log) => {
    const ch = channels(config.database.schema);
    return fn({ pool: db.pool, url: db.url, jobsChannel: ch.jobs, alertsChannel: ch.alerts, log });
  });
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new ExitError(EXIT.usage, `${name}: expected a positive whole number, got ${JSON.stringify(v)}`);
  return n;
}

interface JobsListOptions extends GlobalOptions {
  status?: string;
  type?: string;
  topic?: string;
  endpoint?: string;
  eventId?: string;
  limit: string;
}

export async function jobsList(io: CliIo, o: JobsListOptions): Promise<void> {
  const limit = positiveInt(o.limit, '--limit');
  await admin(io, o, async ({ pool }) => {
    const page = await listJobs(pool, { status: o.status, type: o.type, topic: o.topic, endpoint: o.endpoint, event_id: o.eventId, limit });
    for (const j of page.items) if (!printJson(io, j)) break;
  });
}

export async function jobsShow(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool }) => {
    const job = await getJob(pool, id);
    if (!job) throw new ExitError(EXIT.failure, `no job ${id}`);
    printJson(io, job);
  });
}

export async function jobsRetry(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, jobsChannel }) => printJson(io, await retryJob(pool, id, actor(io), jobsChannel)));
}

export async function jobsCancel(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool }) => printJson(io, await cancelJob(pool, id, actor(io))));
}

interface RedriveOptions extends GlobalOptions {
  status?: string;
  since?: string;
  topic?: string;
  endpoint?: string;
  dryRun?: boolean;
}

export async function jobsRedrive(io: CliIo, o: RedriveOptions): Promise<void> {
  if (o.status !== undefined && o.status !== 'dead')
    throw new ExitError(EXIT.usage, `--status: only "dead" jobs can be redriven, got ${JSON.stringify(o.status)}`);
  let since: Date | undefined;
  if (o.since !== undefined) {
    try {
      since = new Date(Date.now() - parseDuration(o.since));
    } catch (err) {
      throw new ExitError(EXIT.usage, `--since: ${(err as Error).message}`);
    }
  }
  await admin(io, o, async ({ pool, jobsChannel }) => {
    const filter = { status: 'dead' as const, topic: o.topic, endpoint: o.endpoint, since };
    // One JSON line, as POST /v1/jobs/redrive answers: {count}, matched (--dry-run) or re-queued.
    printJson(io, await redriveJobs(pool, o.dryRun ? { ...filter, dry_run: true } : filter, actor(io), jobsChannel));
  });
}

export async function usersAdd(io: CliIo, name: string, o: GlobalOptions & { role: string }): Promise<void> {
  await admin(io, o, async ({ pool }) => printJson(io, await addUser(pool, { name, role: o.role }, actor(io))));
}

export async function usersList(io: CliIo, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool }) => {
    for (const u of await listUsers(pool)) if (!printJson(io, u)) break;
  });
}

export async function usersRevoke(io: CliIo, name: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool }) => printJson(io, await revokeUser(pool, name, actor(io))));
}

interface AlertsOptions extends GlobalOptions {
  follow?: boolean;
  since?: string;
  limit?: string;
  action?: string[];
  state?: string;
  ack?: string;
  ackAll?: boolean;
}

/** `alerts --ack ID` and `--ack-all`: one JSON line, the alert or how many were acknowledged. */
async function acknowledge(io: CliIo, o: AlertsOptions, action: AlertAction[] | undefined): Promise<void> {
  if (o.follow || (o.ack !== undefined && o.ackAll)) throw new ExitError(EXIT.usage, '--ack, --ack-all and --follow: give one of them');
  if (o.ack !== undefined && !/^\d{1,15}$/.test(o.ack))
    throw new ExitError(EXIT.usage, `--ack: expected an alert id, got ${JSON.stringify(o.ack)}`);
  await admin(io, o, async ({ pool }) => {
    if (o.ack !== undefined) printJson(io, await acknowledgeAlert(pool, o.ack, actor(io)));
    else printJson(io, await acknowledgeAlerts(pool, { action }, actor(io)));
  });
}

export async function alerts(io: CliIo, o: AlertsOptions): Promise<void> {
  const since = o.since === undefined ? undefined : Number(o.since);
  if (since !== undefined && (!Number.isInteger(since) || since < 0))
    throw new ExitError(EXIT.usage, `--since: expected an alert id, got ${JSON.stringify(o.since)}`);
  const limit = o.limit === undefined ? undefined : positiveInt(o.limit, '--limit');
  if (limit !== undefined && limit > 1000) throw new ExitError(EXIT.usage, `--limit: at most 1000, got ${limit}`);
  // Refused (exit 2, naming --action) before the database is opened.
  const action = o.action === undefined ? undefined : parseAlertActions(o.action, '--action');
  if (o.ack !== undefined || o.ackAll) return acknowledge(io, o, action);
  if (o.state !== undefined && o.state !== 'open' && o.state !== 'resolved')
    throw new ExitError(EXIT.usage, `--state: expected open or resolved, got ${JSON.stringify(o.state)}`);
  const state = o.state;
  if (state !== undefined && o.follow) throw new ExitError(EXIT.usage, '--state: not with --follow (an alert is open when it is raised)');
  await admin(io, o, async ({ pool, url, alertsChannel, log }) => {
    if (!o.follow) {
      for (const a of await readAlerts(pool, { sinceId: since, limit: limit ?? ALERTS_LIST_DEFAULT, action, state }))
        if (!printJson(io, a)) break;
      return;
    }
    // SIGINT/SIGTERM, the parent exiting (npx) or a closed stdout (`| head`) end the follow,
    // and the database (an embedded server included) is closed as after any command.
    const stop = watchForStop(io, { onStdoutClosed: true });
    try {
      // Its log (stderr, warn and up) says when the database is lost and while it retries.
      await followAlerts({
        pool,
        url,
        channel: alertsChannel,
        sinceId: since,
        backlog: limit ?? ALERTS_TAIL_DEFAULT,
        action,
        signal: stop.signal,
        onAlert: (a) => void printJson(io, a),
        log,
      });
    } finally {
      stop.dispose();
    }
  });
}
