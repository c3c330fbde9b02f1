import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Service } from '../../service.js';
import { READ } from '../auth.js';
import { parse } from '../schemas.js';

/**
 * `GET /v1/stats` (docs/operations.md#dashboard): queue depth by status, the oldest due job, and
 * webhook attempts per time bucket over the last hour (1-minute buckets) or 24 hours (15-minute
 * buckets), ok (2xx) and failed, for the dashboard's overview and anyone else's charts. The attempt
 * counts are a range scan of webhook_attempts_created_idx.
 */

const WINDOWS = { '1h': { ms: 3_600_000, bucketS: 60 }, '24h': { ms: 86_400_000, bucketS: 900 } } as const;
const statsQuery = z.strictObject({ window: z.enum(['1h', '24h'], { error: 'expected 1h or 24h' }).optional() });

export function statsRoutes(app: FastifyInstance, svc: Service): void {
  const pool = svc.db.pool;
  app.get('/v1/stats', { config: { roles: READ } }, async (req) => {
    const window = parse(statsQuery, req.query, 'query').window ?? '1h';
    const w = WINDOWS[window];
    const [queue, due, attempts] = await Promise.all([
      pool.query<{ status: string; n: string }>(`select status, count(*)::text as n from jobs group by status`),
      pool.query<{ run_at: Date | null; now: Date }>(
        `select (select run_at from jobs where status = 'pending' and run_at <= now() order by run_at, id limit 1) as run_at, now() as now`,
      ),
      pool.query<{ at: Date; ok: string; failed: string }>(
        `select to_timestamp(floor(extract(epoch from created_at) / $2) * $2) as at,
                count(*) filter (where status_code between 200 and 299)::text as ok,
                count(*) filter (where status_code is null or status_code not between 200 and 299)::text as failed
         from webhook_attempts where created_at > now() - $1 * interval '1 millisecond'
         group by 1 order by 1`,
        [w.ms, w.bucketS],
      ),
    ]);
    const depth: Record<string, number> = { pending: 0, running: 0, completed: 0, dead: 0, cancelled: 0 };
    for (const r of queue.rows) depth[r.status] = Number(r.n);
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
