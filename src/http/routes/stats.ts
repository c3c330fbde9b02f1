import type { FastifyInstance } from 'fastify';
import type { Service } from '../../service.js';
import { deliveryBuckets, queueCounts } from '../../history/stats.js';
import { route } from '../route.js';

/**
 * `GET /v1/stats` (docs/operations.md#dashboard): jobs by status (pending, running and dead now;
 * completed and cancelled in the last 24 h), the oldest due job, and webhook attempts per time
 * bucket over the last hour (1-minute buckets) or 24 hours (15-minute buckets), ok (2xx) and
 * failed, for the dashboard's overview and anyone else's charts. Every figure comes from a bounded
 * read (src/history/stats.ts): per-minute counters, and live jobs counted up to a cap, so the
 * answer costs the same with a million finished deliveries as with none. Nothing here writes: old
 * counters go with the purge.
 */

const WINDOWS = { '1h': { ms: 3_600_000, bucketS: 60 }, '24h': { ms: 86_400_000, bucketS: 900 } } as const;

export function statsRoutes(app: FastifyInstance, svc: Service): void {
  const pool = svc.db.pool;
  route(app, 'getStats', async ({ query }) => {
    const window = query.window ?? '1h';
    const w = WINDOWS[window];
    const [queue, due, attempts] = await Promise.all([
      queueCounts(pool),
      pool.query<{ run_at: Date | null; now: Date }>(
        `select (select run_at from job_queue where status = 'pending' and run_at <= now() order by run_at, id limit 1) as run_at, now() as now`,
      ),
      deliveryBuckets(pool, w.ms, w.bucketS),
    ]);
    const d = due.rows[0]!;
    let ok = 0;
    let failed = 0;
    const buckets = attempts.map((r) => {
      ok += r.ok;
      failed += r.failed;
      return { at: r.at.toISOString(), ok: r.ok, failed: r.failed };
    });
    return {
      now: d.now.toISOString(),
      queue,
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
