import type pg from 'pg';
import { raiseEndpointAlert } from '../endpoint-state/alerts.js';
import { withTransaction } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { AlertSinks } from '../sinks/outlet.js';
import { expireHeldJobs, type ExpiredRow, type ExpiryCursor } from '../queue/transitions.js';
import { keyBlockedAlerts } from '../webhook/dead-letter.js';
import type { PeriodicRunner } from './scheduler.js';

export type { ExpiredRow };

/** Due jobs a statement reads (and expires at most). */
const BATCH = 1000;
/** Jobs a sweep (one transaction) expires at most; the rest wait for the next sweep, with alerts of their own. */
const MAX_PER_SWEEP = 50_000;
/** The lock that makes sweeps take turns (two-int advisory lock: this class, the schema's hash). */
const LOCK_CLASS = 0x61637765; // "acwe"

export interface ExpiryOptions {
  /** notify.webhook.max_age */
  maxAgeMs: number;
  alertsChannel: string;
  /** The jobs channel: NOTIFYed when the next job of a key whose head expired goes pending, so a worker claims it at once. */
  jobsChannel?: string | null | undefined;
  /** Where alerts go besides the API (docs/operations.md#alert-sinks). */
  alertSinks?: AlertSinks | null | undefined;
  log: Logger;
  batch?: number;
  maxPerSweep?: number;
  /** Metrics hook: the jobs a sweep sent to dead, after its commit. */
  onExpired?: ((rows: readonly ExpiredRow[]) => void) | undefined;
}

export interface EndpointExpiry {
  endpoint: string;
  count: number;
  oldestSeriesStartedAt: Date;
}

export interface SweepResult {
  /** false: another sweep held the lock, and this one changed nothing. */
  ran: boolean;
  expired: number;
  endpoints: EndpointExpiry[];
}

function topicOf(payload: unknown): string | null {
  const t = (payload as { topic?: unknown } | null)?.topic;
  return typeof t === 'string' ? t : null;
}

/** One audit row per expired job (not an alert action: 100,000 of them must not reach `alerts` or the admins). */
async function auditExpired(client: pg.ClientBase, rows: readonly ExpiredRow[]): Promise<void> {
  await client.query(
    `insert into audit_log (action, actor, target_type, target_id, details)
     select 'webhook.expired', 'system', 'job', t.id::text,
       jsonb_build_object('job_id', t.id, 'type', t.type, 'endpoint', t.endpoint, 'topic', t.topic, 'event_id', t.event_id,
                          'attempts', t.attempts, 'reason', 'max_age', 'last_error', 'endpoint unavailable',
                          'series_started_at', t.series_started_at)
     from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::int[], $7::timestamptz[])
       as t(id, type, endpoint, topic, event_id, attempts, series_started_at)`,
    [
      rows.map((r) => r.id),
      rows.map((r) => r.type),
      rows.map((r) => r.endpoint),
      rows.map((r) => topicOf(r.payload)),
      rows.map((r) => r.event_id),
      rows.map((r) => r.attempts),
      rows.map((r) => r.series_started_at),
    ],
  );
}

/**
 * One expiry sweep (docs/operations.md#maximum-age), in one transaction: pending webhook jobs whose
 * series started more than max_age ago go dead ("endpoint unavailable") in statements of `batch`,
 * each with its audit row; then one `endpoint.expired` alert (one inbox message per admin) per
 * endpoint with the count, so an outage costs the admins one inbox message per endpoint per sweep,
 * never one per job. Sweeps take turns on an advisory lock: one that finds it taken does nothing
 * (the other is doing the work), so two processes never alert twice for the same sweep's jobs.
 */
export async function sweepExpiredJobs(pool: pg.Pool, opts: ExpiryOptions): Promise<SweepResult> {
  const batch = opts.batch ?? BATCH;
  const cap = opts.maxPerSweep ?? MAX_PER_SWEEP;
  const expired: ExpiredRow[] = [];
  const result = await withTransaction(pool, async (client): Promise<SweepResult> => {
    const lock = await client.query<{ ok: boolean }>(`select pg_try_advisory_xact_lock($1, hashtext(current_schema())) as ok`, [
      LOCK_CLASS,
    ]);
    if (!lock.rows[0]?.ok) return { ran: false, expired: 0, endpoints: [] };
    let after: ExpiryCursor | undefined;
    while (expired.length < cap) {
      const page = await expireHeldJobs(client, {
        maxAgeMs: opts.maxAgeMs,
        batch: Math.min(batch, cap - expired.length),
        after,
        channel: opts.jobsChannel ?? null,
      });
      if (page.rows.length > 0) {
        await auditExpired(client, page.rows);
        expired.push(...page.rows);
        // A strict key's head that expired blocks its key: alerted as when a delivery's head goes dead.
        const keyed = page.rows.filter((r) => r.ordering_key !== null);
        if (keyed.length > 0)
          await keyBlockedAlerts(
            client,
            keyed.map((r) => ({ id: r.id, endpoint: r.endpoint, orderingKey: r.ordering_key, lastError: 'endpoint unavailable' })),
            opts.alertsChannel,
            opts.alertSinks ?? null,
          );
      }
      if (!page.next) break;
      after = page.next;
    }
    const byEndpoint = new Map<string, EndpointExpiry>();
    for (const r of expired) {
      const e = byEndpoint.get(r.endpoint);
      if (!e) byEndpoint.set(r.endpoint, { endpoint: r.endpoint, count: 1, oldestSeriesStartedAt: r.series_started_at });
      else {
        e.count++;
        if (r.series_started_at < e.oldestSeriesStartedAt) e.oldestSeriesStartedAt = r.series_started_at;
      }
    }
    // In name order, so alerts and log lines come out in a stable order.
    const endpoints = [...byEndpoint.values()].toSorted((a, b) => (a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : 0));
    for (const e of endpoints) {
      await raiseEndpointAlert(
        client,
        opts.alertsChannel,
        {
          action: 'endpoint.expired',
          endpoint: e.endpoint,
          details: {
            count: e.count,
            reason: 'endpoint unavailable',
            max_age_ms: opts.maxAgeMs,
            oldest_series_started_at: e.oldestSeriesStartedAt.toISOString(),
          },
        },
        opts.alertSinks ?? null,
      );
    }
    return { ran: true, expired: expired.length, endpoints };
  });
  for (const e of result.endpoints)
    opts.log.warn(
      { event: 'endpoint.expired', endpoint: e.endpoint, count: e.count, oldest_series_started_at: e.oldestSeriesStartedAt.toISOString() },
      'held jobs older than notify.webhook.max_age went dead: endpoint unavailable',
    );
  if (expired.length > 0) opts.onExpired?.(expired);
  return result;
}

/**
 * The sweep every minute, or every tenth of max_age when that is shorter (at least every second),
 * so a job goes dead at most that much past its age.
 */
export function expiryInterval(maxAgeMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(maxAgeMs / 10)));
}

export function jobExpiry(opts: Omit<ExpiryOptions, 'log'>): PeriodicRunner {
  return {
    name: 'job_expiry',
    intervalMs: expiryInterval(opts.maxAgeMs),
    cluster: true,
    run: async ({ pool, log }) => {
      await sweepExpiredJobs(pool, { ...opts, log });
    },
  };
}
