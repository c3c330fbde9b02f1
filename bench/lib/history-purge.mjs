// The history scenario's purge (bench/README.md#history-at-volume): acw's own purgeOld from the
// build under test, with retentions chosen so that each call finds exactly one more UTC day of
// history past retention; once on a quiet copy of the template, once while deliveries run.
import { readFileSync } from 'node:fs';
import { SECRET, sleep, TOPIC, wallNow } from './common.mjs';
import { dist } from './dist.mjs';
import { N, RUN_TIMEOUT_S } from './env.mjs';
import { cpuDelta, cpuNow, POSTGRES } from './pgstats.mjs';
import { round } from './report.mjs';
import { acw } from '../systems/index.mjs';

const DAY_MS = 86_400_000;

/**
 * What the service passes the purge as shipped: the longest a job waits before it goes dead
 * (`notify.webhook.max_age`, read from the build's own config schema; a day where the build has
 * none), by which events outlive their jobs' retention.
 */
async function shippedMaxJobAgeMs() {
  const { parseConfig } = await dist('config/index.js');
  const cfg = parseConfig({
    database: { url: 'postgres://127.0.0.1/x' },
    notify: { webhook: { url: 'http://127.0.0.1/', secret: SECRET, topics: [TOPIC] } },
  });
  return cfg.notify.webhook.max_age ?? DAY_MS;
}

/**
 * Days purged one call after the other, until a call also meets the events of the first day: the
 * daily purge of a steady state, which drops a day of history and deletes the events of a day
 * that left max_age + a day before.
 */
export const purgeSteps = (maxJobAgeMs) => 2 + Math.ceil(maxJobAgeMs / DAY_MS);

/** Exact rows finished on the UTC day starting at `dayMs` (history layout: one partition each), or null on the old layout. */
async function dayRows(db, dayMs) {
  const h = (await db.query(`select to_regclass('job_history') is not null as h`)).rows[0].h;
  if (!h) return null;
  const r = await db.query(
    `select (select count(*)::int from job_history where status = 'completed' and finished_at >= $1 and finished_at < $2) as completed,
            (select count(*)::int from job_history where status in ('dead', 'cancelled') and finished_at >= $1 and finished_at < $2) as dead,
            (select count(*)::int from job_attempts where created_at >= $1 and created_at < $2) as attempts`,
    [new Date(dayMs), new Date(dayMs + DAY_MS)],
  );
  return r.rows[0];
}

/**
 * purgeOld on `url` (purgeSteps() calls): call i with both retentions set so that the days from
 * the first (`fromMs`, a UTC midnight) to the i-th are past them, and the next is not. Events stay
 * a day past their jobs' retention plus the longest a job waits, so the last call also deletes
 * the first day's events: the daily purge of a steady state. Before the first, the copy is
 * brought to the state a purge the day before would have left (job counts older than 3 days gone).
 * `onStep(i, phase)` is called before and after each.
 */
async function purgeDays(url, fromMs, { server, onStep } = {}) {
  const { purgeOld } = await dist('runners/purge.js');
  const maxJobAgeMs = await shippedMaxJobAgeMs();
  const steps = purgeSteps(maxJobAgeMs);
  const { createPool } = await dist('db/pool.js');
  const pool = createPool({ url, size: 2, schema: 'public' });
  const out = [];
  try {
    // As yesterday's purge left it: job finish counts are kept 2 days, and the template has a week of them.
    if ((await pool.query(`select to_regclass('job_counts') is not null as h`)).rows[0].h) {
      await pool.query(`delete from job_counts where minute < now() - interval '3 days'`);
    }
    for (let i = 0; i < steps; i++) {
      const day = fromMs + i * DAY_MS;
      const before = await dayRows(pool, day);
      const now = (await pool.query(`select extract(epoch from now())::float8 * 1000 as ms`)).rows[0].ms;
      // The day's partitions end at day + 1 d: past a retention of now - (day + 1 d), with a minute to spare.
      const retention = now - (day + DAY_MS) - 60_000;
      onStep?.(i, 'start');
      const cpu0 = server ? cpuNow(server, { pg: POSTGRES }) : null;
      const t0 = wallNow();
      const counts = await purgeOld(pool, { completedRetentionMs: retention, deadRetentionMs: retention, maxJobAgeMs, batchSize: 1000 });
      const t1 = wallNow();
      const cpu1 = server ? cpuNow(server, { pg: POSTGRES }) : null;
      onStep?.(i, 'end');
      out.push({
        step: i + 1,
        day: new Date(day).toISOString().slice(0, 10),
        retention_h: round(retention / 3_600_000, 2),
        max_job_age_h: round(maxJobAgeMs / 3_600_000, 1),
        seconds: round((t1 - t0) / 1000, 3),
        started_at: t0,
        ended_at: t1,
        ...(cpu0 ? { cpu_s: cpuDelta(cpu0, cpu1) } : {}),
        day_rows: before,
        counts,
      });
    }
  } finally {
    await pool.end();
  }
  return out;
}

/** The purge on a quiet copy: one result per step. */
export async function runPurgeQuiet(ctx, { server, url, fromMs, run, fields }) {
  const steps = await purgeDays(url, fromMs, { server });
  for (const s of steps) ctx.emit({ scenario: 'history', phase: 'purge', run, ...fields, ...s });
  return steps;
}

/** Deliveries per second and the longest gap between two arrivals within [a, b) of sorted arrival times. */
function window(times, a, b) {
  const xs = times.filter((t) => t >= a && t < b);
  let gap = 0;
  for (let i = 1; i < xs.length; i++) gap = Math.max(gap, xs[i] - xs[i - 1]);
  const seconds = (b - a) / 1000;
  return {
    seconds: round(seconds, 2),
    deliveries: xs.length,
    per_s: seconds > 0 ? round(xs.length / seconds, 0) : null,
    max_gap_ms: round(gap, 1),
  };
}

/**
 * The purge while acw default drains N deliveries on `url`: the steps start once a fifth of them
 * arrived. Reported: each step's time, the delivery rate and the longest gap between arrivals
 * before, during and after the purge, and what the worker logged at warn or above.
 */
export async function runPurgeLive(ctx, { server, url, fromMs, run, fields, logFile }) {
  const { receiver } = ctx;
  await acw.enqueue(url, { mode: 'deliver', n: N });
  await server.checkpoint();
  await receiver.reset({ target: N, latency: true });
  const w = ctx.spawn('worker.mjs', {
    envVar: 'BENCH_WORKER',
    cfg: { system: 'acw', variant: 'default', mode: 'deliver', url, receiverUrl: receiver.url, target: N, logLevel: 'warn' },
    stdoutFile: logFile,
  });
  try {
    await w.wait('loaded', 60_000);
    const t0 = wallNow();
    w.send({ cmd: 'go' });
    const reached = receiver.wait('reached', RUN_TIMEOUT_S * 1000).catch(() => null);
    while ((await receiver.stats()).count < N / 5 && !w.exit) await sleep(100);
    const steps = await purgeDays(url, fromMs, { server });
    const purgeStart = steps[0].started_at;
    const purgeEnd = steps.at(-1).ended_at;
    const done = await reached;
    const st = await receiver.stats(true, 30_000);
    const times = st.arrivals.map(([, at]) => at).toSorted((a, b) => a - b);
    const end = times.at(-1) ?? wallNow();
    const lines = readFileSync(logFile, 'utf8').split('\n').filter(Boolean);
    const logged = lines.map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return { level: 0, msg: l };
      }
    });
    const problems = logged.filter((l) => l.level >= 40);
    const r = {
      scenario: 'history',
      phase: 'purge-live',
      run,
      ...fields,
      jobs: N,
      delivered: st.count,
      distinct_ids: st.distinct,
      drained: done !== null,
      steps: steps.map(({ started_at: at, ended_at: _end, ...s }) => ({ ...s, from_go_s: round((at - t0) / 1000, 2) })),
      purge_seconds: round((purgeEnd - purgeStart) / 1000, 3),
      before: window(times, times[0] ?? t0, purgeStart),
      during: window(times, purgeStart, purgeEnd),
      after: window(times, purgeEnd, end + 1),
      worker_warnings: problems.filter((l) => l.level < 50).length,
      worker_errors: problems.filter((l) => l.level >= 50).length,
      worker_messages: [...new Set(problems.map((l) => `${l.level}: ${l.msg ?? ''}${l.err?.message ? ` (${l.err.message})` : ''}`))].slice(
        0,
        8,
      ),
      log: logFile,
    };
    ctx.emit(r);
    return r;
  } finally {
    await ctx.stopChild(w);
  }
}
