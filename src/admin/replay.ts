import { createHash } from 'node:crypto';
import type pg from 'pg';
import { parseDuration, type Endpoint } from '../config/index.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ApiError, badField } from '../errors.js';
import type { Logger } from '../log.js';
import { insertJobs, replayJobs } from '../queue/transitions.js';
import type { NewJob } from '../queue/types.js';
import { WEBHOOK_JOB, buildBody, webhookJobId, webhookJobIdV5, type DeliverPayload } from '../webhook/job.js';
import { hasLegacyEvents, promoteLegacyJobs } from '../history/upgrade.js';
import { uuidFloor } from '../notify/event-id.js';
import { writeAudit } from './audit.js';
import { requireEndpoint } from './params.js';
import { isPrintable } from './params.js';

/**
 * Replay of one endpoint's window (docs/operations.md#replaying-an-endpoint), shared by
 * `POST /v1/endpoints/:name/replay` and `acw-webhooks endpoints replay`: its jobs made in the window
 * go back to pending with a fresh attempt series (same ids, so receivers deduplicate), and the
 * matching events of the window that have no job for it get one. One transaction, one audit row.
 */

export const REPLAY_STATUSES = ['dead', 'all'] as const;
export type ReplayStatus = (typeof REPLAY_STATUSES)[number];

/** The request as the caller gave it: `since`/`until` an RFC 3339 time or a duration ago ("2h"). */
export interface ReplayRequest {
  since: string;
  until?: string | undefined;
  /** `dead` (default): dead jobs only; `all`: completed ones too. */
  status?: string | undefined;
  dry_run?: boolean | undefined;
  /** The same key from the same actor again (within 24 h): the first answer, nothing written. */
  idempotency_key?: string | undefined;
}

export interface ParsedReplay {
  since: Date;
  until: Date;
  status: ReplayStatus;
  dryRun: boolean;
  key: string | undefined;
  /** Of the request as given (relative times unresolved), so a retried request matches its first answer. */
  hash: string;
}

export interface ReplayContext {
  pool: pg.Pool;
  /** The endpoints in force now (config, or stored ones): the whitelist of the one named applies. */
  endpoints: readonly Endpoint[];
  /** jobs.job_purge: the window is cut where the purge may have deleted what it held. */
  purge: { readonly enabled: boolean; readonly completed_retention: number; readonly dead_retention: number };
  maxAttempts: number;
  jobsChannel: string;
  /** Where the `endpoint.replay` line goes once a replay commits. */
  log?: Logger | undefined;
}

export interface ReplayAnswer {
  endpoint: string;
  status: ReplayStatus;
  window: { since: string; until: string };
  /** Jobs reset to pending (with dry_run: that would be). */
  reset: number;
  /** Jobs made for events of the window that had none for this endpoint (with dry_run: that would be). */
  created: number;
  /** Jobs of the window left as they are, by status: queued or running already, cancelled, or completed under `dead`. */
  unchanged: Record<string, number>;
  /** True when the window asked for began before the purge retention: it was cut at `window.since`. */
  retention_limited: boolean;
  requested_since?: string;
  note?: string;
  dry_run?: true;
  /** The answer of an earlier request with the same idempotency key: nothing was written now. */
  repeated?: true;
}

/** Events read, and jobs made, per statement. */
/** Idempotency keys are honoured at least this long, as notify's are. */
const KEY_TTL = '24 hours';

/** An RFC 3339 time with its offset, or a Go-style duration meaning that long before `nowMs`. */
function instant(value: unknown, field: string, nowMs: number): Date {
  const bad = () => badField(field, 'expected an RFC 3339 time like "2026-12-01T02:00:00Z" or a duration like "2h"');
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) throw bad();
  if (/^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:\d\d)$/.test(value)) {
    const d = new Date(value);
    if (!Number.isNaN(d.getTime())) return d;
    throw bad();
  }
  let d: Date;
  try {
    d = new Date(nowMs - parseDuration(value));
  } catch {
    throw bad();
  }
  // "99999999999h" parses, but lies beyond any date (and beyond PostgreSQL's).
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1) throw bad();
  return d;
}

/** Checks every field before anything is read or written: a bad one is a 400 naming it. */
export function parseReplayRequest(r: ReplayRequest, nowMs = Date.now()): ParsedReplay {
  const since = instant(r.since, 'since', nowMs);
  const until = r.until === undefined ? new Date(nowMs) : instant(r.until, 'until', nowMs);
  if (since.getTime() >= until.getTime()) {
    throw badField('since', `must be earlier than until (${until.toISOString()}), got ${since.toISOString()}`);
  }
  const status = r.status ?? 'dead';
  if (!(REPLAY_STATUSES as readonly string[]).includes(status)) {
    throw badField('status', `expected "dead" or "all", got ${JSON.stringify(String(status).slice(0, 40))}`);
  }
  if (r.dry_run !== undefined && typeof r.dry_run !== 'boolean') throw badField('dry_run', 'expected true or false');
  const key = r.idempotency_key;
  if (key !== undefined && (typeof key !== 'string' || key.length === 0 || key.length > 200 || !isPrintable(key))) {
    throw badField('idempotency_key', 'expected 1-200 printable characters');
  }
  const hash = createHash('sha256')
    .update(JSON.stringify([r.since, r.until ?? null, status]))
    .digest('hex');
  return { since, until, status: status as ReplayStatus, dryRun: r.dry_run === true, key, hash };
}

/**
 * The whitelist as SQL arrays: `*`, exact topics, and `prefix.*` as LIKE patterns (`_` escaped,
 * topics being `[a-z0-9_.]`), matching what topicMatches does in the fan-out.
 */
function whitelist(topics: readonly string[]): { all: boolean; exact: string[]; like: string[] } {
  return {
    all: topics.includes('*'),
    exact: topics.filter((t) => !t.includes('*')),
    like: topics.filter((t) => t.endsWith('.*')).map((t) => `${t.slice(0, -1).replaceAll('_', '\\_')}%`),
  };
}

/** Events are read a page at a time. */
const PAGE = 1000;

/**
 * How far an event's id (its first 48 bits: the milliseconds of the clock of the process that made
 * it) may be from its created_at (the database's now()): the window's id bounds are widened by
 * this on each side. They only serve to skip the day partitions of event_log outside the window.
 */
const ID_SKEW_MS = 86_400_000;

/** The columns read from either table of events (the older layout's has no trace context). */
const EVENT_COLUMNS = 'id, topic, data, created_at, dispatched_at, traceparent, tracestate';
const V1_COLUMNS = 'id, topic, data, created_at, dispatched_at, null::text as traceparent, null::text as tracestate';

/**
 * Dispatched events of the window that match the whitelist, a page after ($6, $7) in (created_at, id)
 * order. The page key is the time in microseconds, as text: a JS Date keeps milliseconds only, and a
 * key cut to them would read the last event of a page again, or a page of one instant for ever.
 * event_log is read between the id bounds $8 and $9, which prune its day partitions to the window's;
 * while the table of the older layout is kept (`legacy`), its rows (older ids, random ones among
 * them) are read beside, without the bounds.
 */
const windowEvents = (
  legacy: boolean,
): string => `select e.id, e.topic, e.data, e.created_at, e.traceparent, e.tracestate, e.ordering_key, e.v1,
    to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as page_key
  from (select ${EVENT_COLUMNS}, ordering_key, false as v1 from event_log where id >= $8::uuid and id < $9::uuid
        ${legacy ? `union all select ${V1_COLUMNS}, null, true from events_v1` : ''}) e
  where e.dispatched_at is not null and e.created_at >= $1 and e.created_at < $2
    and ($3::boolean or e.topic = any($4::text[]) or e.topic like any($5::text[]))
    and (e.created_at, e.id) > ($6::timestamptz, $7::uuid)
  order by e.created_at, e.id limit ${PAGE}`;

interface EventRow {
  id: string;
  topic: string;
  data: unknown;
  created_at: Date;
  ordering_key: string | null;
  /** A row of the older layout's table, which is dropped whole without looking at jobs: its jobs carry their body. */
  v1: boolean;
  page_key: string;
  traceparent: string | null;
  tracestate: string | null;
}

/** Reset (or count), create (or count), audit; or the first answer again for a key seen before. */
export async function replayEndpoint(ctx: ReplayContext, name: string, req: ReplayRequest, actor: string): Promise<ReplayAnswer> {
  const p = parseReplayRequest(req);
  const ep = requireEndpoint(ctx.endpoints, name);
  const run = async (client: Queryable): Promise<ReplayAnswer> => {
    if (p.key !== undefined && !p.dryRun) {
      const earlier = await earlierAnswer(client, actor, ep.name, p);
      if (earlier) return earlier;
    }
    const until = p.until;
    const start = await windowStart(client, ctx, p);
    // A window wholly past the retention is empty, not reversed.
    const since = start.since.getTime() > until.getTime() ? until : start.since;
    const limited = start.limited;
    const statuses = p.status === 'all' ? ['dead', 'completed'] : ['dead'];
    if (!p.dryRun) {
      // Jobs of the window still in the old layout's table are brought over, where replayJobs looks.
      await promoteLegacyJobs(client, {
        where: (q) => `endpoint = ${q(0)} and created_at >= ${q(1)} and created_at < ${q(2)}`,
        values: [ep.name, since, until],
      });
    }
    const byStatus = await client.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from jobs where endpoint = $1 and created_at >= $2 and created_at < $3 group by status`,
      [ep.name, since, until],
    );
    const unchanged: Record<string, number> = {};
    let resettable = 0;
    for (const r of byStatus.rows) {
      if (statuses.includes(r.status)) resettable += r.n;
      else unchanged[r.status] = r.n;
    }
    const w = whitelist(ep.topics);
    const match = [since, until, w.all, w.exact, w.like];
    const bounds = [uuidFloor(since.getTime() - ID_SKEW_MS), uuidFloor(until.getTime() + ID_SKEW_MS)];
    const legacy = await hasLegacyEvents(client);
    let reset = resettable;
    let created = 0;
    if (p.dryRun) {
      created = await createMissing(client, ctx, ep, { match, bounds, legacy }, false);
    } else {
      reset = await replayJobs(client, { endpoint: ep.name, since, until, statuses });
      if (reset > 0) await client.query(`select pg_notify($1, '')`, [ctx.jobsChannel]);
      created = await createMissing(client, ctx, ep, { match, bounds, legacy }, true);
    }
    const answer: ReplayAnswer = {
      endpoint: ep.name,
      status: p.status,
      window: { since: since.toISOString(), until: until.toISOString() },
      reset,
      created,
      unchanged,
      retention_limited: limited,
      ...(limited
        ? {
            requested_since: p.since.toISOString(),
            note:
              'the window began before the purge retention (jobs.job_purge), where jobs may be deleted already: it starts at ' +
              `${since.toISOString()} instead; older dead jobs can still be re-queued with jobs redrive --endpoint ${ep.name}`,
          }
        : {}),
      ...(p.dryRun ? { dry_run: true as const } : {}),
    };
    if (!p.dryRun) {
      await writeAudit(client, {
        action: 'endpoint.replay',
        actor,
        targetType: 'endpoint',
        targetId: ep.name,
        details: {
          endpoint: ep.name,
          window: answer.window,
          status: p.status,
          reset,
          created,
          retention_limited: limited,
          ...(p.key !== undefined ? { idempotency_key: p.key, request_hash: p.hash, answer } : {}),
        },
      });
    }
    return answer;
  };
  // A dry run reads only; in one snapshot so its counts agree with each other.
  if (p.dryRun) {
    return withTransaction(ctx.pool, async (client) => {
      await client.query('set transaction read only');
      return run(client);
    });
  }
  const answer = await withTransaction(ctx.pool, run);
  if (!answer.repeated) {
    ctx.log?.info(
      {
        event: 'endpoint.replay',
        endpoint: answer.endpoint,
        actor,
        status: answer.status,
        ...answer.window,
        reset: answer.reset,
        created: answer.created,
      },
      `replayed ${answer.reset + answer.created} jobs of endpoint ${answer.endpoint}`,
    );
  }
  return answer;
}

/**
 * The start of the window: the one asked for, or, with the purge on, no earlier than the shorter
 * retention ago (database clock). Past it a finished job of this endpoint may be deleted already,
 * and its event would then look as if it never had one: replaying it would resend a delivery that
 * succeeded. Events outlive the shorter retention (purge.ts keeps them at least completed_retention).
 */
async function windowStart(client: Queryable, ctx: ReplayContext, p: ParsedReplay): Promise<{ since: Date; limited: boolean }> {
  if (!ctx.purge.enabled) return { since: p.since, limited: false };
  const retention = Math.min(ctx.purge.completed_retention, ctx.purge.dead_retention);
  const res = await client.query<{ horizon: Date }>(`select now() - $1 * interval '1 millisecond' as horizon`, [retention]);
  const horizon = res.rows[0]!.horizon;
  return p.since.getTime() < horizon.getTime() ? { since: horizon, limited: true } : { since: p.since, limited: false };
}

/**
 * Jobs for the window's events with none for this endpoint, a page at a time, as the fan-out makes
 * them (same id); or, on a dry run (`write` false), how many it would make. An event has a job when
 * its id exists anywhere in `jobs`: the id the fan-out makes now, or the one older versions made
 * (webhookJobIdV5), so that a delivery made before an upgrade is never sent again under a new id.
 */
async function createMissing(
  client: Queryable,
  ctx: ReplayContext,
  ep: Endpoint,
  window: { match: unknown[]; bounds: string[]; legacy: boolean },
  write: boolean,
): Promise<number> {
  let created = 0;
  let after: [string, string] = ['-infinity', '00000000-0000-0000-0000-000000000000'];
  const sql = windowEvents(window.legacy);
  for (;;) {
    const page = await client.query<EventRow>(sql, [...window.match, ...after, ...window.bounds]);
    const ids = page.rows.map((ev) => webhookJobId(ev.id, ep.name));
    const older = page.rows.map((ev) => webhookJobIdV5(ev.id, ep.name));
    // A job finishes after its event was made, so history before the page's first event holds none
    // of them: the bound prunes every older day partition from the lookup.
    const first = page.rows[0]?.created_at ?? new Date(0);
    const have = await client.query<{ id: string }>(
      `select id from jobs where id = any($1::uuid[]) and (finished_at is null or finished_at >= $2)`,
      [[...ids, ...older], first],
    );
    const exists = new Set(have.rows.map((r) => r.id));
    const missing = page.rows.filter((_, i) => !exists.has(ids[i]!) && !exists.has(older[i]!));
    if (!write) created += missing.length;
    else if (missing.length > 0) {
      const jobs: NewJob[] = missing.map((ev) => {
        const payload: DeliverPayload = {
          topic: ev.topic,
          // An event of event_log gives its body by reference (docs/architecture.md#bodies-by-reference).
          ...(ev.v1 ? { body: buildBody({ id: ev.id, topic: ev.topic, occurredAt: ev.created_at, data: ev.data }) } : {}),
          // A replayed delivery's attempts link to the notify too (docs/operations.md#tracing).
          ...(ev.traceparent === null
            ? {}
            : { traceparent: ev.traceparent, ...(ev.tracestate === null ? {} : { tracestate: ev.tracestate }) }),
        };
        return {
          id: webhookJobId(ev.id, ep.name),
          type: WEBHOOK_JOB,
          payload,
          maxAttempts: ctx.maxAttempts,
          eventId: ev.id,
          endpoint: ep.name,
          // A keyed event joins its key's queue, after the replayed jobs (docs/operations.md#ordered-delivery).
          ...(ev.ordering_key !== null ? { orderingKey: ev.ordering_key, strictOrdering: ep.ordering === 'strict' } : {}),
        };
      });
      // skipExisting: a job made since the read (a concurrent replay) is left as it is.
      created += (await insertJobs(client, jobs, ctx.jobsChannel, undefined, { skipExisting: true })).ids.length;
    }
    const last = page.rows.at(-1);
    if (!last || page.rows.length < PAGE) return created;
    after = [last.page_key, last.id];
  }
}

/**
 * The answer of this actor's earlier replay of the endpoint with the same key, or a 409 when that
 * key came with another request. Requests with one key wait for each other (advisory lock until
 * commit), so two at once do not both replay.
 */
async function earlierAnswer(client: Queryable, actor: string, endpoint: string, p: ParsedReplay): Promise<ReplayAnswer | null> {
  await client.query(`select pg_advisory_xact_lock(hashtextextended($1, 0))`, [`acw.replay\n${actor}\n${endpoint}\n${p.key}`]);
  const res = await client.query<{ details: { request_hash?: string; answer?: ReplayAnswer } }>(
    `select details from audit_log
     where action = 'endpoint.replay' and target_id = $1 and actor = $2 and details->>'idempotency_key' = $3
       and created_at > now() - interval '${KEY_TTL}'
     order by id desc limit 1`,
    [endpoint, actor, p.key],
  );
  const row = res.rows[0];
  if (!row) return null;
  if (row.details.request_hash !== p.hash || !row.details.answer) {
    throw new ApiError(409, 'idempotency_conflict', 'idempotency_key: already used with a different request', { field: 'idempotency_key' });
  }
  return { ...row.details.answer, repeated: true };
}
