import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryBuckets, deliveryHealth, queueCounts } from '../../src/history/stats.js';
import { rollupCounters, statsRollup } from '../../src/history/stats-rollup.js';
import { attemptArrays } from '../../src/queue/attempt-rows.js';
import { silentLogger } from '../../src/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The fold of settled minutes' slot rows into one row per endpoint and minute
// (docs/architecture.md#live-jobs-and-history): what the operator reads answer is the same before
// and after, nothing written while it runs is lost, and the minutes still being written are left alone.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('truncate delivery_stats, job_counts, job_attempts, runner_state');
});

const ENDPOINTS = ['e1', 'e2', 'e3', ''];
/** Minutes ago that rows are written at: clear of every read window's edge (60 and 1,440 minutes), so a minute passing mid-test moves none in or out. */
const AGO = [0, 1, 2, 3, 5, 17, 44, 45, 56, 70, 130, 600, 1_300, 1_430, 1_500, 3_000];

/** A deterministic pseudo-random sequence, so a failure can be replayed. */
function rng(start: number): () => number {
  let s = start;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

/** Slot rows as pooled writers leave them: several slots per endpoint and minute, the newest error of each at its own millisecond. */
async function seed(): Promise<void> {
  const r = rng(26);
  const rows: unknown[] = [];
  let ms = 0;
  for (const ago of AGO) {
    for (const endpoint of ENDPOINTS) {
      for (let slot = 0; slot < 10; slot++) {
        if (r() < 0.3) continue;
        ms += 1;
        const failed = Math.floor(r() * 4);
        // Old counters of the upgrade carry no buckets ('{}'); some rows are shorter than 18.
        const len = endpoint === '' ? 0 : r() < 0.2 ? 10 : 18;
        rows.push({
          ago,
          endpoint,
          slot,
          ok: Math.floor(r() * 50),
          failed,
          permanent: Math.min(failed, Math.floor(r() * 2)),
          buckets: Array.from({ length: len }, () => Math.floor(r() * 9)),
          at_ms: Math.floor(r() * 59_000),
          error: failed > 0 ? `boom ${ms}` : null,
          err_ms: ms,
        });
      }
    }
  }
  await db.pool.query(
    `insert into delivery_stats (minute, endpoint, slot, ok, failed, permanent, buckets, last_at, last_error, last_error_at)
     select m, x.endpoint, x.slot, x.ok, x.failed, x.permanent, x.buckets, m + x.at_ms * interval '1 ms', x.error,
            case when x.error is not null then m + x.err_ms * interval '1 ms' end
       from json_to_recordset($1::json) as x(ago int, endpoint text, slot int, ok int, failed int, permanent int, buckets int[],
                                             at_ms int, error text, err_ms int),
            lateral (select date_bin('1 minute', now(), timestamptz 'epoch') - x.ago * interval '1 minute' as m) t`,
    [JSON.stringify(rows)],
  );
  await db.pool.query(
    `insert into job_counts (minute, slot, completed, dead, cancelled)
     select date_bin('1 minute', now(), timestamptz 'epoch') - ago * interval '1 minute', slot, ago % 7 + slot, slot % 2, (ago + slot) % 3
       from unnest($1::int[]) ago, generate_series(0, 9) slot`,
    [AGO],
  );
}

/** Everything the operator reads make of the counters, and the raw totals. */
async function answers(): Promise<unknown> {
  const names = ENDPOINTS;
  const totals = await db.pool.query(
    `select sum(ok)::int as ok, sum(failed)::int as failed, sum(permanent)::int as permanent, max(last_at) as last_at,
            (select sum(n)::int from delivery_stats, unnest(buckets) n where slot >= -1) as bucketed,
            (select sum(completed + 2 * dead + 3 * cancelled)::int from job_counts) as jobs
       from delivery_stats where slot >= -1`,
  );
  const perMinute = await db.pool.query(
    `select minute, endpoint, sum(ok)::int as ok, sum(failed)::int as failed, sum(permanent)::int as permanent, max(last_at) as last_at,
            max(last_error_at) as last_error_at,
            (array_agg(last_error order by last_error_at desc) filter (where last_error_at is not null))[1] as last_error
       from delivery_stats where slot >= -1 group by 1, 2 order by 1, 2`,
  );
  const q = await queueCounts(db.pool);
  return {
    totals: totals.rows[0],
    perMinute: perMinute.rows,
    h1: await deliveryBuckets(db.pool, 3_600_000, 60),
    h24: await deliveryBuckets(db.pool, 86_400_000, 900),
    health60: Object.fromEntries(await deliveryHealth(db.pool, names, 60)),
    health1440: Object.fromEntries(await deliveryHealth(db.pool, names, 1_440)),
    week: Object.fromEntries(await deliveryHealth(db.pool, names, 10_080)),
    jobs: [q.completed_24h, q.cancelled_24h],
  };
}

/** Minutes whose TOTAL row is not the sum of their FOLDED rows (none, always). */
const totalsOff = async (): Promise<unknown[]> =>
  (
    await db.pool.query(
      `select minute, t.ok, t.failed, t.permanent, f.ok as f_ok, f.failed as f_failed, f.permanent as f_permanent
         from (select minute, ok, failed, permanent from delivery_stats where slot = -2) t
         full join (select minute, sum(ok)::int as ok, sum(failed)::int as failed, sum(permanent)::int as permanent
                      from delivery_stats where slot = -1 group by 1) f using (minute)
        where (t.ok, t.failed, t.permanent) is distinct from (f.ok, f.failed, f.permanent)`,
    )
  ).rows;

const slotRows = async (where: string): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from delivery_stats where slot >= 0 and ${where}`)).rows[0]!.n;

describe('the counter rollup', () => {
  it('folds settled minutes into one row per endpoint and minute, and every read answers the same', async () => {
    await seed();
    const before = await answers();
    const current = await db.pool.query(
      `select minute, endpoint, slot, ok from delivery_stats where minute >= date_bin('1 minute', now(), timestamptz 'epoch') - interval '1 minute'
        order by 1, 2, 3`,
    );
    expect(current.rows.length).toBeGreaterThan(10);
    // A small batch splits minutes between statements.
    const r = await rollupCounters(db.pool, { batch: 7 });
    expect(r.done).toBe(true);
    expect(r.statements).toBeGreaterThan(20);
    expect(r.delivery_stats).toBeGreaterThan(100);
    expect(r.job_counts).toBeGreaterThan(10);
    expect(await answers()).toEqual(before);
    expect(await totalsOff()).toEqual([]);
    // Settled minutes hold the rollup's rows only; the minute being written and the one before keep their slots.
    expect(await slotRows(`minute < date_bin('1 minute', now(), timestamptz 'epoch') - interval '3 minutes'`)).toBe(0);
    const still = await db.pool.query(`select minute, endpoint, slot, ok from delivery_stats where minute >= $1 order by 1, 2, 3`, [
      current.rows[0].minute,
    ]);
    expect(still.rows).toEqual(current.rows);
    const jc = await db.pool.query(`select count(*)::int as n from job_counts where slot >= 0 and minute < now() - interval '3 minutes'`);
    expect(jc.rows[0].n).toBe(0);
    // Again: nothing left to fold.
    const again = await rollupCounters(db.pool, { from: r.next });
    expect(again.delivery_stats + again.job_counts).toBe(0);
  });

  it('a budget stops it between statements, and the next call goes on from there', async () => {
    await seed();
    const before = await answers();
    const first = await rollupCounters(db.pool, { batch: 5, budgetMs: 0 });
    // One statement per table, then it stops.
    expect(first.done).toBe(false);
    expect(first.statements).toBe(2);
    let r = first;
    let calls = 0;
    while (!r.done) {
      r = await rollupCounters(db.pool, { batch: 5, from: r.next, budgetMs: 0 });
      calls++;
    }
    expect(calls).toBeGreaterThan(0);
    expect(await slotRows(`minute < date_bin('1 minute', now(), timestamptz 'epoch') - interval '3 minutes'`)).toBe(0);
    expect(await answers()).toEqual(before);
  });

  it('loses nothing written while it runs: the live writer in the current minute and late writes into minutes being folded', async () => {
    await seed();
    const base = await db.pool.query<{ ok: number; failed: number; n: number; jobs: number }>(
      `select sum(ok)::int as ok, sum(failed)::int as failed, (select sum(n)::int from delivery_stats, unnest(buckets) n where slot >= -1) as n,
              (select sum(completed)::int from job_counts) as jobs
         from delivery_stats where slot >= -1`,
    );
    let ok = base.rows[0]!.ok;
    let failed = base.rows[0]!.failed;
    let bucketed = base.rows[0]!.n;
    let jobs = base.rows[0]!.jobs;
    const state = { writing: true };
    // Each late write waits for the next fold statement, so that writes and folds interleave.
    const waiting: Array<() => void> = [];
    const afterAFold = (): Promise<void> => (state.writing ? new Promise<void>((resolve) => waiting.push(resolve)) : Promise.resolve());
    const writers: Promise<void>[] = [];
    // The outcome statements' own SQL (attempt rows and the current minute's counters) from four connections.
    for (let w = 0; w < 4; w++) {
      writers.push(
        (async () => {
          for (let i = 0; i < 40; i++) {
            const items = ENDPOINTS.slice(0, 3).map((endpoint, k) => ({
              leased: { id: randomUUID(), leaseToken: randomUUID() },
              attempt: {
                attempt: 1,
                endpoint,
                statusCode: k === 2 ? 500 : 200,
                errorKind: k === 2 ? 'http' : null,
                error: k === 2 ? 'status 500' : null,
                durationMs: 10 * k,
                responseBody: null,
              },
            }));
            const att = attemptArrays(items)!;
            await db.pool.query(`with w as (select null::uuid as id, false as dead where false)${att.cte(1, 'w')} select 1`, att.values);
            ok += 2;
            failed += 1;
            bucketed += 3;
          }
        })(),
      );
    }
    // Late writes (a long transaction's counters) into the settled minutes the rollup folds, every slot.
    for (let w = 0; w < 4; w++) {
      writers.push(
        (async () => {
          const r = rng(w + 1);
          for (let i = 0; i < 60; i++) {
            await afterAFold();
            const ago = AGO[3 + Math.floor(r() * (AGO.length - 3))]!;
            const slot = Math.floor(r() * 10);
            await db.pool.query(
              `insert into delivery_stats as s (minute, endpoint, slot, ok, failed, buckets, last_at)
               values (date_bin('1 minute', now(), timestamptz 'epoch') - $1::int * interval '1 minute', 'e1', $2, 1, 1, '{0,2}', now())
               on conflict (minute, endpoint, slot) do update set ok = s.ok + excluded.ok, failed = s.failed + excluded.failed,
                 buckets = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(s.buckets, excluded.buckets) u(x, y))`,
              [ago, slot],
            );
            await db.pool.query(
              `insert into job_counts as c (minute, slot, completed)
               values (date_bin('1 minute', now(), timestamptz 'epoch') - $1::int * interval '1 minute', $2, 1)
               on conflict (minute, slot) do update set completed = c.completed + excluded.completed`,
              [ago, slot],
            );
            ok += 1;
            failed += 1;
            bucketed += 2;
            jobs += 1;
          }
        })(),
      );
    }
    const done = Promise.all(writers).finally(() => {
      state.writing = false;
    });
    let folded = 0;
    let folds = 0;
    while (state.writing) {
      // One statement per table from the oldest minute: slot rows the late writes keep making are folded again and again.
      const r = await rollupCounters(db.pool, { batch: 3, budgetMs: 0 });
      folded += r.delivery_stats;
      folds++;
      for (const wake of waiting.splice(0)) wake();
    }
    await done;
    const last = await rollupCounters(db.pool);
    expect(folds).toBeGreaterThan(60);
    expect(folded + last.delivery_stats).toBeGreaterThan(100);
    const after = await db.pool.query(
      `select sum(ok)::int as ok, sum(failed)::int as failed, (select sum(n)::int from delivery_stats, unnest(buckets) n where slot >= -1) as n,
              (select sum(completed)::int from job_counts) as jobs
         from delivery_stats where slot >= -1`,
    );
    expect(after.rows[0]).toEqual({ ok, failed, n: bucketed, jobs });
    expect(await totalsOff()).toEqual([]);
  });

  it('never waits for a row someone holds, and leaves it for a later run', async () => {
    await seed();
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      // A long transaction holding one settled slot row (a late write not yet committed).
      const held = await holder.query(
        `update delivery_stats set ok = ok + 1
          where (minute, endpoint, slot) = (select minute, endpoint, slot from delivery_stats where slot >= 0 and minute < now() - interval '1 hour' limit 1)
          returning minute, endpoint, slot`,
      );
      expect(held.rows).toHaveLength(1);
      const r = await rollupCounters(db.pool);
      expect(r.delivery_stats).toBeGreaterThan(0);
      expect(await slotRows(`minute < date_bin('1 minute', now(), timestamptz 'epoch') - interval '3 minutes'`)).toBe(1);
      await holder.query('commit');
      const later = await rollupCounters(db.pool);
      expect(later.delivery_stats).toBe(1);
      expect(await slotRows(`minute < date_bin('1 minute', now(), timestamptz 'epoch') - interval '3 minutes'`)).toBe(0);
    } finally {
      holder.release();
    }
  });

  it('runs as the stats_rollup runner, its first run walking every minute kept', async () => {
    await seed();
    const runner = statsRollup({ batch: 50 });
    expect(runner).toMatchObject({ name: 'stats_rollup', cluster: true, intervalMs: 60_000 });
    const ctl = new AbortController();
    await runner.run({ pool: db.pool, log: silentLogger, signal: ctl.signal });
    expect(await slotRows(`minute < date_bin('1 minute', now(), timestamptz 'epoch') - interval '3 minutes'`)).toBe(0);
    expect(await slotRows('true')).toBeGreaterThan(0);
  });
});
