import { hostname } from 'node:os';
import type pg from 'pg';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { VERSION } from '../version.js';

/**
 * The process registry (docs/operations.md#processes): each `serve` and `worker` process keeps a
 * row in `processes` fresh, so operators (GET /v1/workers, `acw-webhooks status`, the dashboard)
 * see what runs, and notify can say when nothing would deliver its jobs.
 */

/** How often a process refreshes its row. */
export const BEAT_MS = 10_000;
/**
 * The layout this version writes (2: job_queue and job_history, migration 0010; 3: events in day
 * partitions, migration 0012; 4: a job of an event in event_log carries no body, migration 0018):
 * a migration that changes it again can tell the processes that write or read the old one.
 */
export const JOB_LAYOUT = 4;

/** A row not seen for this long is shown as gone: three missed beats. */
export const GONE_MS = 3 * BEAT_MS;
/** Rows gone for this long are deleted (by any registering process, at most every PURGE_EVERY_BEATS beats). */
const PURGE_AFTER = '1 hour';
const PURGE_EVERY_BEATS = 30;
/** notify warns when no process running jobs has been seen for this long. */
export const WORKER_SEEN_MS = 60_000;
/** notify's answer to "is a worker alive" is reused this long: one indexed read at most this often. */
const SEEN_CACHE_MS = 5_000;

export interface ProcessInfo {
  id: string;
  mode: 'serve' | 'worker';
  /** Runs jobs: outbox pump, workers and runners. */
  jobs: boolean;
  /** Deliveries (jobs) in flight in it now. */
  inFlight: () => number;
  /** The periodic runners it schedules. */
  runners: () => string[];
}

/** Keeps this process's row fresh from start() to stop(). A failed beat logs and is tried again next beat. */
export class ProcessRegistration {
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private startedAt: Date | null = null;
  private beats = 0;
  private stopped = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly info: ProcessInfo,
    private readonly log: Logger,
    private readonly beatMs = BEAT_MS,
  ) {}

  /** The first beat (awaited, so the row exists once the process is up), then one every beatMs. */
  async start(): Promise<void> {
    await this.beat();
    if (this.stopped) return;
    this.timer = setInterval(() => {
      this.beating ??= this.beat().finally(() => (this.beating = null));
    }, this.beatMs);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    const i = this.info;
    try {
      // started_at is kept from the first beat: a row deleted meanwhile (a long pause) comes back as it was.
      const res = await this.pool.query<{ started_at: Date }>({
        name: 'acw_process_beat',
        text: `insert into processes as p (id, mode, host, pid, version, jobs, started_at, in_flight, runners, layout)
               values ($1, $2, $3, $4, $5, $6, coalesce($7::timestamptz, now()), $8, $9, ${JOB_LAYOUT})
               on conflict (id) do update set last_seen = now(), in_flight = excluded.in_flight, runners = excluded.runners
               returning p.started_at`,
        values: [i.id, i.mode, hostname(), process.pid, VERSION, i.jobs, this.startedAt, i.inFlight(), i.runners()],
      });
      this.startedAt ??= res.rows[0]?.started_at ?? null;
      if (this.beats++ % PURGE_EVERY_BEATS === 0) {
        await this.pool.query(`delete from processes where last_seen < now() - interval '${PURGE_AFTER}'`);
      }
    } catch (err) {
      this.log.warn(
        { event: 'process.beat_failed', err: coerceError(err).message },
        'could not refresh this process in the process registry',
      );
    }
  }

  /** Stop beating and delete the row: a process that stops is not shown as gone, it is not there. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.beating;
    await this.pool.query('delete from processes where id = $1', [this.info.id]).catch((err: unknown) => {
      this.log.warn(
        { event: 'process.beat_failed', err: coerceError(err).message },
        'could not remove this process from the process registry',
      );
    });
  }
}

export interface ProcessRow {
  id: string;
  mode: 'serve' | 'worker';
  host: string;
  pid: number;
  version: string;
  jobs: boolean;
  started_at: string;
  last_seen: string;
  in_flight: number;
  runners: string[];
  /** Not seen for three beats: killed, hung or cut off from the database. */
  gone: boolean;
}

/** Every registered process, newest seen first. */
export async function listProcesses(db: pg.Pool | pg.ClientBase): Promise<{ now: string; items: ProcessRow[] }> {
  const res = await db.query<Omit<ProcessRow, 'started_at' | 'last_seen'> & { started_at: Date; last_seen: Date; now: Date }>(
    `select id, mode, host, pid, version, jobs, started_at, last_seen, in_flight, runners,
            last_seen < now() - $1 * interval '1 millisecond' as gone, now() as now
       from processes order by last_seen desc, id limit 1000`,
    [GONE_MS],
  );
  const now = res.rows[0]?.now ?? (await db.query<{ now: Date }>('select now() as now')).rows[0]!.now;
  return {
    now: now.toISOString(),
    items: res.rows.map((r) => ({
      id: r.id,
      mode: r.mode,
      host: r.host,
      pid: r.pid,
      version: r.version,
      jobs: r.jobs,
      started_at: r.started_at.toISOString(),
      last_seen: r.last_seen.toISOString(),
      in_flight: r.in_flight,
      runners: r.runners,
      gone: r.gone,
    })),
  };
}

export const NO_WORKER_WARNING = 'no worker has been seen in the last minute: the job waits until one runs (acw-webhooks serve or worker)';

/** Whether a process running jobs has been seen in the last minute: one indexed read. */
export async function workerSeen(db: pg.Pool | pg.ClientBase): Promise<boolean> {
  const res = await db.query<{ seen: boolean }>({
    name: 'acw_worker_seen',
    text: `select exists (select 1 from processes where jobs and last_seen > now() - $1 * interval '1 millisecond') as seen`,
    values: [WORKER_SEEN_MS],
  });
  return res.rows[0]?.seen === true;
}

/**
 * notify's warning, cached per pool for a few seconds so the hot path pays one indexed read at
 * most every SEEN_CACHE_MS. A failed read (a database not migrated to 0008) says nothing: a
 * warning is no reason to fail a notify.
 */
const seenCache = new WeakMap<object, { at: number; seen: Promise<boolean> }>();
export async function noWorkerWarning(db: pg.Pool): Promise<string | undefined> {
  const now = performance.now();
  let c = seenCache.get(db);
  if (!c || now - c.at > SEEN_CACHE_MS) {
    c = { at: now, seen: workerSeen(db).catch(() => true) };
    seenCache.set(db, c);
  }
  return (await c.seen) ? undefined : NO_WORKER_WARNING;
}
