import type { FastifyInstance } from 'fastify';
import { coerceError } from '../../errors.js';
import type { Service } from '../../service.js';
import { route } from '../route.js';

/**
 * `GET /v1/stats` (docs/operations.md#dashboard): jobs by status (pending, running and dead now;
 * completed and cancelled in the last 24 h), the oldest due job, and
 * webhook attempts per time bucket over the last hour (1-minute buckets) or 24 hours (15-minute
 * buckets), ok (2xx) and failed, for the dashboard's overview and anyone else's charts. The counts
 * come from `delivery_counts` (migration 0007: per minute, kept by a trigger on webhook_attempts),
 * so a busy day costs at most 1,440 x 64 small rows, never a scan of its attempts.
 */

/** Counts older than the longest window are of no use; deleted by the stats reads, at most once an hour per process. */
const KEEP_COUNTS = '2 days';
const PRUNE_EVERY_MS = 3_600_000;

const WINDOWS = { '1h': { ms: 3_600_000, bucketS: 60 }, '24h': { ms: 86_400_000, bucketS: 900 } } as const;

export function statsRoutes(app: FastifyInstance, svc: Service): void {
  const pool = svc.db.pool;
  let prunedAt = -Infinity;
  const prune = (): void => {
    if (performance.now() - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = performance.now();
    pool.query(`delete from delivery_counts where minute < now() - interval '${KEEP_COUNTS}'`).catch((err: unknown) => {
      prunedAt = -Infinity;
      svc.log.warn({ event: 'stats.prune_failed', err: coerceError(err).message }, 'could not delete old delivery counts');
    });
  };
  route(app, 'getStats', async ({ query }) => {
    const window = query.window ?? '1h';
    prune();
    const w = WINDOWS[window];
    const [queue, due, attempts] = await Promise.all([
      // Each count a scan of its status's partial index; completed and cancelled jobs pile up until
      // purged, so only the last day's are counted (by completed_at, updated_at: indexed too).
      pool.query<Record<string, string>>(
        `select (select count(*) from jobs where status = 'pending')::text as pending,
                (select count(*) from jobs where status = 'running')::text as running,
                (select count(*) from jobs where status = 'dead')::text as dead,
                (select count(*) from jobs where status = 'completed' and completed_at > now() - interval '24 hours')::text as completed_24h,
                (select count(*) from jobs where status = 'cancelled' and updated_at > now() - interval '24 hours')::text as cancelled_24h`,
      ),
      pool.query<{ run_at: Date | null; now: Date }>(
        `select (select run_at from jobs where status = 'pending' and run_at <= now() order by run_at, id limit 1) as run_at, now() as now`,
      ),
      pool.query<{ at: Date; ok: string; failed: string }>(
        `select date_bin($2 * interval '1 second', minute, timestamptz 'epoch') as at, sum(ok)::text as ok, sum(failed)::text as failed
         from delivery_counts where minute > now() - $1 * interval '1 millisecond'
         group by 1 order by 1`,
        [w.ms, w.bucketS],
      ),
    ]);
    const q = queue.rows[0]!;
    const depth = {
      pending: Number(q.pending),
      running: Number(q.running),
      dead: Number(q.dead),
      completed_24h: Number(q.completed_24h),
      cancelled_24h: Number(q.cancelled_24h),
    };
    const d = due.rows[0]!;
    let ok = 0;
    let failed = 0;
    const buckets = attempts.rows.map((r) => {
      ok += Number(r.ok);
      failed += Number(r.failed);
      return { at: r.at.toISOString(), ok: Number(r.ok), failed: Number(r.failed) };
    });
    return {
      now: d.now.toISOString(),
      queue: depth,
      oldest_due: d.run_at
        ? { run_at: d.run_at.toISOString(), age_seconds: Math.max(0, (d.now.getTime() - d.run_at.getTime()) / 1000) }
        : null,
      deliveries: {
        window,
        bucket_seconds: w.bucketS,
        total: ok + failed,
        failed,
        failure_rate: ok + failed === 0 ? 0 : failed / (ok + failed),
        per_minute: (ok + failed) / (w.ms / 60_000),
        buckets,
      },
    };
  });
}
