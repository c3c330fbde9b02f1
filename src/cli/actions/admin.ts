import { userInfo } from 'node:os';
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
import { listBlockedKeys, retryHead, skipHead } from '../../admin/ordering.js';
import { parseAlertActions, type AlertAction } from '../../admin/alerts.js';
import { parseDuration, resolveEndpoints, type Config } from '../../config/index.js';
import type { Queryable } from '../../db/pool.js';
import { readStoredEndpoints } from '../../endpoints/rows.js';
import { channels } from '../../db/sql.js';
import type { Logger } from '../../log.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, writeLine, type CliIo } from '../io.js';
import { ALERTS_LIST_DEFAULT, ALERTS_TAIL_DEFAULT } from '../options.js';
import { watchForStop } from '../stop.js';
import { cut, formatTable, forPeople, printTable, type JsonOption } from '../table.js';
import { ALERT_HEADERS, alertRow, JOB_HEADERS, jobRow, USER_HEADERS, userRow } from '../views.js';

/**
 * Operator commands act as this principal in audit_log (and as the owner of what they create): the
 * OS user running them, from the environment or, where it names none (a container, cron), the
 * account itself; its uid when even that has no name.
 */
export function actor(io: CliIo): string {
  const named = io.env.USER || io.env.LOGNAME;
  if (named) return `cli:${named}`;
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return `cli:uid-${process.getuid?.() ?? 'none'}`;
  }
}

/** Run an admin operation against the configured database (its refusals become exit codes in main). */
async function admin<T>(
  io: CliIo,
  o: GlobalOptions,
  fn: (ctx: { pool: pg.Pool; url: string; jobsChannel: string; alertsChannel: string; log: Logger; config: Config }) => Promise<T>,
): Promise<T> {
  const config = readConfig(io, o, { needSecrets: false }); // none of these delivers
  return withDatabase(io, config, async (db, log) => {
    const ch = channels(config.database.schema);
    return fn({ pool: db.pool, url: db.url, jobsChannel: ch.jobs, alertsChannel: ch.alerts, log, config });
  });
}

/** The endpoints disabled now, in the config file or through the API (a config endpoint wins over a stored one of its name). */
async function disabledEndpoints(db: Queryable, config: Config): Promise<Set<string>> {
  const fromConfig = resolveEndpoints(config);
  const names = new Set(fromConfig.map((e) => e.name));
  const stored = (await readStoredEndpoints(db)).filter((r) => !names.has(r.name));
  return new Set([...fromConfig.filter((e) => !e.enabled).map((e) => e.name), ...stored.filter((r) => !r.enabled).map((r) => r.name)]);
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new ExitError(EXIT.usage, `${name}: expected a positive whole number, got ${JSON.stringify(v)}`);
  return n;
}

interface JobsListOptions extends GlobalOptions, JsonOption {
  status?: string;
  type?: string;
  topic?: string;
  endpoint?: string;
  eventId?: string;
  limit: string;
}

export async function jobsList(io: CliIo, o: JobsListOptions): Promise<void> {
  const limit = positiveInt(o.limit, '--limit');
  await admin(io, o, async ({ pool, config }) => {
    const page = await listJobs(
      pool,
      { status: o.status, type: o.type, topic: o.topic, endpoint: o.endpoint, event_id: o.eventId, limit },
      await disabledEndpoints(pool, config),
    );
    if (forPeople(io, o)) printTable(io, JOB_HEADERS, page.items.map(jobRow), 'no jobs');
    else for (const j of page.items) if (!printJson(io, j)) break;
  });
}

export async function jobsShow(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, config }) => {
    const job = await getJob(pool, id, await disabledEndpoints(pool, config));
    if (!job) throw new ExitError(EXIT.failure, `no job ${id}`);
    printJson(io, job);
  });
}

export async function jobsRetry(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, jobsChannel, config }) =>
    printJson(io, await retryJob(pool, id, actor(io), jobsChannel, await disabledEndpoints(pool, config))),
  );
}

export async function jobsCancel(io: CliIo, id: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, jobsChannel }) => printJson(io, await cancelJob(pool, id, actor(io), jobsChannel)));
}

interface BlockedOptions extends GlobalOptions {
  endpoint?: string;
  limit: string;
}

export async function jobsBlocked(io: CliIo, o: BlockedOptions): Promise<void> {
  const limit = positiveInt(o.limit, '--limit');
  await admin(io, o, async ({ pool }) => {
    for (const k of (await listBlockedKeys(pool, { endpoint: o.endpoint, limit })).items) if (!printJson(io, k)) break;
  });
}

export async function jobsRetryHead(io: CliIo, endpoint: string, key: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, jobsChannel }) => printJson(io, await retryHead(pool, endpoint, key, actor(io), jobsChannel)));
}

export async function jobsSkipHead(io: CliIo, endpoint: string, key: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool, jobsChannel }) => printJson(io, await skipHead(pool, endpoint, key, actor(io), jobsChannel)));
}

const deadJobs = (n: number): string => `${n} dead job${n === 1 ? '' : 's'}`;

interface RedriveOptions extends GlobalOptions, JsonOption {
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
    // One JSON line, as POST /v1/jobs/redrive answers: {count}, matched (--dry-run, which says so) or re-queued.
    const out = await redriveJobs(pool, o.dryRun ? { ...filter, dry_run: true } : filter, actor(io), jobsChannel);
    if (!forPeople(io, o)) printJson(io, o.dryRun ? { ...out, dry_run: true } : out);
    else writeLine(io, o.dryRun ? `dry run: would re-queue ${deadJobs(out.count)}` : `re-queued ${deadJobs(out.count)}`);
  });
}

export async function usersAdd(io: CliIo, name: string, o: GlobalOptions & { role: string }): Promise<void> {
  await admin(io, o, async ({ pool }) => printJson(io, await addUser(pool, { name, role: o.role }, actor(io))));
}

export async function usersList(io: CliIo, o: GlobalOptions & JsonOption): Promise<void> {
  await admin(io, o, async ({ pool }) => {
    const users = await listUsers(pool);
    if (forPeople(io, o)) printTable(io, USER_HEADERS, users.map(userRow), 'no users');
    else for (const u of users) if (!printJson(io, u)) break;
  });
}

export async function usersRevoke(io: CliIo, name: string, o: GlobalOptions): Promise<void> {
  await admin(io, o, async ({ pool }) => printJson(io, await revokeUser(pool, name, actor(io))));
}

interface AlertsOptions extends GlobalOptions, JsonOption {
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
    const people = forPeople(io, o);
    if (!o.follow) {
      const list = await readAlerts(pool, { sinceId: since, limit: limit ?? ALERTS_LIST_DEFAULT, action, state });
      if (people) printTable(io, ALERT_HEADERS, list.map(alertRow), 'no alerts');
      else for (const a of list) if (!printJson(io, a)) break;
      return;
    }
    // Followed on a terminal, one aligned line each (the header's widths cannot know what comes later).
    const line = (a: Parameters<typeof alertRow>[0]) => cut(formatTable(ALERT_HEADERS, [alertRow(a)])[1]!, io.columns);
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
        onAlert: (a) => void (people ? writeLine(io, line(a)) : printJson(io, a)),
        log,
      });
    } finally {
      stop.dispose();
    }
  });
}
