import { createHash } from 'node:crypto';
import type pg from 'pg';
import { topicMatches, type Endpoint } from '../config/index.js';
import type { Logger } from '../log.js';
import { withTransaction, type TransactionOptions } from '../db/pool.js';
import { insertJobs, type HoldOptions } from '../queue/transitions.js';
import type { ClaimedJob, NewJob } from '../queue/types.js';
import { buildBody } from '../webhook/sign.js';

export const WEBHOOK_JOB = 'webhook.deliver';

/** What the `webhook.deliver` job carries: the body is fixed here, so every retry sends the same bytes. */
export interface DeliverPayload {
  topic: string;
  body: string;
}

export interface EventRow {
  id: string;
  topic: string;
  data: unknown;
  recipients: string[];
  created_at: Date;
}

export interface DispatchContext {
  /** Read at dispatch time: the whitelist in force now applies. */
  endpoints: () => readonly Endpoint[];
  webhooksEnabled: () => boolean;
  maxAttempts: number;
  jobsChannel: string;
  log: Logger;
  /** This process's worker pool, when it runs one: the jobs it has room for are inserted already claimed. */
  adopter?: () => JobAdopter | null;
}

/** What dispatch needs of a worker pool to hand it jobs directly (WorkerPool implements it). */
export interface JobAdopter {
  readonly workerId: string;
  readonly leaseMs: number;
  reserve(type: string, endpoint: string | null): boolean;
  unreserve(endpoints: ReadonlyArray<string | null>): void;
  adopt(jobs: readonly ClaimedJob[]): Promise<void>;
}

/**
 * Claim on dispatch: a job this process's pool has a free slot for is inserted as `running` under
 * the pool's worker id and handed to the pool once the transaction commits, instead of going in as
 * `pending` and coming back through NOTIFY, wake-up and a claim. One per dispatch transaction.
 */
export class Handover {
  private reservedEndpoints: Array<string | null> = [];
  private held: ClaimedJob[] = [];

  constructor(private readonly adopter: JobAdopter | null) {}

  /** Reserve pool slots for as many of these jobs as fit; they must carry ids. */
  hold(jobs: readonly NewJob[]): HoldOptions | undefined {
    const a = this.adopter;
    if (!a) return undefined;
    const ids = new Set<string>();
    for (const j of jobs) {
      if (j.id === undefined || j.delayMs) continue;
      if (!a.reserve(j.type, j.endpoint ?? null)) continue;
      ids.add(j.id);
      this.reservedEndpoints.push(j.endpoint ?? null);
    }
    return ids.size > 0 ? { workerId: a.workerId, leaseMs: a.leaseMs, ids } : undefined;
  }

  inserted(jobs: readonly ClaimedJob[]): void {
    this.held.push(...jobs);
  }

  /** After commit: the pool runs the held jobs; any slot reserved without a row comes back. */
  async commit(): Promise<void> {
    const a = this.adopter;
    if (!a || this.reservedEndpoints.length === 0) return;
    const unused = [...this.reservedEndpoints];
    for (const j of this.held) {
      const k = unused.indexOf(j.endpoint);
      if (k >= 0) unused.splice(k, 1);
    }
    this.reservedEndpoints = [];
    if (unused.length > 0) a.unreserve(unused);
    const held = this.held;
    this.held = [];
    await a.adopt(held);
  }

  /** After a rollback (or a failed commit): nothing was written, every reserved slot comes back. */
  rollback(): void {
    if (this.adopter && this.reservedEndpoints.length > 0) this.adopter.unreserve(this.reservedEndpoints);
    this.reservedEndpoints = [];
    this.held = [];
  }
}

/**
 * One dispatch transaction with its Handover: the held jobs go to the pool after commit, their
 * slots come back after a rollback. If a COMMIT's reply is lost the jobs may exist, running under
 * our worker id with nobody working them: the reaper hands them back when their lease runs out.
 */
export async function dispatchTransaction<T>(
  pool: pg.Pool,
  ctx: DispatchContext,
  fn: (client: pg.PoolClient, h: Handover) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  const handover = new Handover(ctx.adopter?.() ?? null);
  let result: T;
  try {
    result = await withTransaction(pool, (client) => fn(client, handover), opts);
  } catch (err) {
    handover.rollback();
    throw err;
  }
  await handover.commit();
  return result;
}

export interface DispatchResult {
  event_id: string;
  job_ids: string[];
  /** Why no job was written, when none was. */
  skipped?: 'webhooks_disabled' | 'no_matching_endpoint';
  /** Recipients named that are no user (outbox events only; the HTTP route refuses them first). */
  unknown_recipients?: string[];
}

export interface DispatchOptions {
  /** Jobs this process's pool can take go in as running (see Handover). */
  handover?: Handover;
  /** The caller already set `dispatched_at` on these events (the dispatcher locks and marks in one statement). */
  marked?: boolean;
  /** Leave jobs that exist already alone instead of failing (see insertJobs). */
  skipExisting?: boolean;
}

/** The name-based (version 5) UUID namespace of webhook job ids. */
const JOB_ID_NAMESPACE = Buffer.from('5b0f0c3e8a9d4c1e9f3a6d2b7e41c0a8', 'hex');

/**
 * The id of the `webhook.deliver` job of one event for one endpoint: a version 5 UUID of the two,
 * so dispatching the same event again (after a database crash lost an asynchronous commit) makes
 * the same jobs, and a receiver sees the same `X-ACW-Event-Id` on a repeated delivery.
 */
export function webhookJobId(eventId: string, endpoint: string): string {
  const h = createHash('sha1').update(JOB_ID_NAMESPACE).update(`${eventId}\n${endpoint}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * Fan events out, inside the caller's transaction: one in-app notification per recipient and one
 * `webhook.deliver` job per enabled endpoint whose whitelist matches, then mark them dispatched.
 */
export async function dispatchEvents(
  client: pg.ClientBase,
  events: readonly EventRow[],
  ctx: DispatchContext,
  opts: DispatchOptions = {},
): Promise<DispatchResult[]> {
  if (events.length === 0) return [];
  const enabled = ctx.webhooksEnabled();
  const endpoints = enabled ? ctx.endpoints().filter((e) => e.enabled) : [];
  const jobs: NewJob[] = [];
  const results: DispatchResult[] = events.map((ev) => {
    const matching = endpoints.filter((e) => topicMatches(e.topics, ev.topic));
    if (matching.length > 0) {
      const payload: DeliverPayload = {
        topic: ev.topic,
        body: buildBody({ id: ev.id, topic: ev.topic, occurredAt: ev.created_at, data: ev.data }),
      };
      const jobIds = matching.map((e) => webhookJobId(ev.id, e.name));
      matching.forEach((e, k) =>
        jobs.push({ id: jobIds[k], type: WEBHOOK_JOB, payload, maxAttempts: ctx.maxAttempts, eventId: ev.id, endpoint: e.name }),
      );
      return { event_id: ev.id, job_ids: jobIds };
    }
    const skipped = enabled ? 'no_matching_endpoint' : 'webhooks_disabled';
    ctx.log.info({ event: 'webhook.skipped', event_id: ev.id, topic: ev.topic, reason: skipped }, 'no webhook job for this event');
    return { event_id: ev.id, job_ids: [], skipped };
  });
  const inserted = await insertJobs(client, jobs, ctx.jobsChannel, opts.handover?.hold(jobs), { skipExisting: opts.skipExisting === true });
  opts.handover?.inserted(inserted.held);
  if (ctx.log.isLevelEnabled('debug')) {
    for (const id of inserted.ids) ctx.log.debug({ event: 'job.enqueued', job_id: id, type: WEBHOOK_JOB }, 'job enqueued');
  }

  const withRecipients = events.filter((e) => e.recipients.length > 0);
  if (withRecipients.length > 0) {
    const res = await client.query<{ event_id: string; missing: string[] | null }>(
      `with r as (
         select e.id as event_id, e.topic, e.data, unnest(e.recipients) as name
         from events e where e.id = any($1::uuid[])),
       ins as (
         insert into notifications (user_id, topic, data, event_id)
         select u.id, r.topic, r.data, r.event_id from r join users u on u.name = r.name and u.revoked_at is null
         returning 1)
       select r.event_id, array_agg(r.name) filter (where u.id is null) as missing
       from r left join users u on u.name = r.name and u.revoked_at is null
       group by r.event_id`,
      [withRecipients.map((e) => e.id)],
    );
    for (const row of res.rows) {
      if (!row.missing || row.missing.length === 0) continue;
      const r = results.find((x) => x.event_id === row.event_id);
      if (r) r.unknown_recipients = row.missing;
      ctx.log.warn({ event: 'notify.unknown_recipients', event_id: row.event_id, recipients: row.missing }, 'recipients are no user');
    }
  }
  if (!opts.marked) {
    await client.query({
      name: 'acw_mark_dispatched',
      text: `update events set dispatched_at = now() where id = any($1::uuid[])`,
      values: [events.map((e) => e.id)],
    });
  }
  return results;
}
