import type pg from 'pg';
import type { PeriodicRunner } from './scheduler.js';

/**
 * Each connection keeps a generic plan of the queue's named statements (the claims, the outcome
 * writes, the renewal) from their sixth run, costed for the size job_queue had then, and uses it
 * until job_queue's statistics change. A plan made while job_queue held a few dozen pages finds the
 * jobs of a batch by reading the whole table (cheaper than index probes at that size), and keeps
 * reading the whole table after a burst has filled it with thousands of pending jobs; autovacuum,
 * which would analyze it and so have the plans made again, looks at it once a minute at most
 * (`autovacuum_naptime`, a server setting). So once job_queue has more than twice the pages its
 * statistics were taken at, it is analyzed here: every connection makes its plans over job_queue
 * again, for the size it has now (docs/architecture.md#live-jobs-and-history).
 */
export const GROWTH_FACTOR = 2;
/** Below this many pages (128 KiB) a table read is as cheap as the probes: not worth an analyze. */
export const MIN_PAGES = 16;

export interface QueueAnalyze {
  analyzed: boolean;
  /** job_queue's pages now, and those its statistics were taken at. */
  pages: number;
  statsPages: number;
}

/** Analyze job_queue when it has grown past GROWTH_FACTOR times the pages of its statistics (a catalog read otherwise). */
export async function analyzeGrownQueue(db: Pick<pg.Pool, 'query'>): Promise<QueueAnalyze> {
  // Only its owner may analyze it (anyone else gets a warning and nothing done): a service
  // connecting as another role than the one that migrated leaves it to autovacuum.
  const { rows } = await db.query<{ pages: number; stats_pages: number; owner: boolean }>({
    name: 'acw_queue_size',
    text: `select (pg_relation_size(c.oid) / current_setting('block_size')::int)::int as pages, c.relpages as stats_pages,
        pg_has_role(c.relowner, 'USAGE') as owner
      from pg_class c where c.oid = 'job_queue'::regclass`,
  });
  const pages = rows[0]?.pages ?? 0;
  const statsPages = rows[0]?.stats_pages ?? 0;
  const analyzed = rows[0]?.owner === true && pages >= MIN_PAGES && pages > GROWTH_FACTOR * statsPages;
  // skip_locked: another process (or autovacuum) analyzing it right now does the same.
  if (analyzed) await db.query('analyze (skip_locked) job_queue');
  return { analyzed, pages, statsPages };
}

/** Every second, in every process: a read of job_queue's size in the catalog, an analyze when it has grown. */
export function jobQueueAnalyze(opts: { intervalMs?: number } = {}): PeriodicRunner {
  return {
    name: 'job_queue_analyze',
    intervalMs: opts.intervalMs ?? 1_000,
    cluster: false,
    run: async ({ pool, log }) => {
      const r = await analyzeGrownQueue(pool);
      if (r.analyzed)
        log.debug(
          { event: 'job.queue_analyzed', pages: r.pages, stats_pages: r.statsPages },
          'job_queue grew: analyzed, its plans are made again',
        );
    },
  };
}
