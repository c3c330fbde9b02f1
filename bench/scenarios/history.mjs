// history (issue 26, bench/README.md#history-at-volume): BENCH_HISTORY_ROWS finished deliveries,
// loaded once per machine and layout into a template kept under bench/.cache/, on a PostgreSQL at
// its default memory settings. Per run, each against a fresh copy of the template: the drain of
// BENCH_JOBS deliveries beside the same drain on an empty database (interleaved), the operator
// reads through `serve`'s HTTP API, and the purge of one day at a time, quiet and while deliveries
// run; once, the bytes each delivery kept in history costs.
import { int, list } from '../lib/env.mjs';
import { historySizes, openHistory } from '../lib/history-cache.mjs';
import { holdPurge, settle, vacuum } from '../lib/history-prep.mjs';
import { HISTORY_DEAD_EVERY } from '../lib/history-data.mjs';
import { runPurgeLive, runPurgeQuiet } from '../lib/history-purge.mjs';
import { rollupCopy, runReads, shiftCounters } from '../lib/history-reads.mjs';
import { fmt, median, perRun, ratio, round, rx, targetsMarkdown } from '../lib/report.mjs';
import { runThroughput } from '../lib/throughput.mjs';
import { label } from '../systems/index.mjs';

export const HISTORY = {
  rows: int('BENCH_HISTORY_ROWS', 5_000_000),
  calls: int('BENCH_HISTORY_READS', 50),
  phases: list('BENCH_HISTORY_PHASES', ['drain', 'reads', 'purge', 'size']),
  copy: process.env.BENCH_HISTORY_COPY ?? 'file_copy',
  settleMs: int('BENCH_HISTORY_SETTLE_MS', 5_000),
};
if (!['file_copy', 'wal_log'].includes(HISTORY.copy)) throw new Error('BENCH_HISTORY_COPY: file_copy or wal_log');
for (const p of HISTORY.phases) {
  if (!['drain', 'reads', 'purge', 'size'].includes(p))
    throw new Error(`BENCH_HISTORY_PHASES: unknown phase ${p} (drain, reads, purge, size)`);
}

const DRAIN_SYSTEMS = ['acw-default', 'acw-tuned'];
const TARGET = { drain: 0.9, readP95Ms: 50, purgeS: 5 };

/** The history server of this invocation, opened at first use and stopped at shutdown. */
let opened = null;
function open(ctx) {
  opened ??= openHistory({ rows: HISTORY.rows, deadEvery: HISTORY_DEAD_EVERY, note: ctx.note }).then((h) => {
    ctx.onShutdown(() => h.server.stop());
    return h;
  });
  return opened;
}

/** A fresh copy of the template (or of `from`), timed. */
async function copy(h, name, from = h.template) {
  const t = performance.now();
  const url = await h.server.createDatabase(name, from, { strategy: HISTORY.copy });
  return { url, copy_s: round((performance.now() - t) / 1000, 1) };
}

async function runHistory(ctx, _key, run) {
  const h = await open(ctx);
  const fields = { layout: h.info.layout, rows: h.info.rows };
  if (run === 1)
    ctx.emit({
      scenario: 'history',
      phase: 'template',
      run,
      ...h.info,
      copy: HISTORY.copy,
      postgres: h.server.version,
      settings: h.server.settings,
    });
  const fromMs = Date.parse(h.info.from);
  if (HISTORY.phases.includes('drain')) {
    // Both databases of a system are made before either drains and dropped after both: dropping a
    // 7 GiB copy frees that much memory at once, which this VM's host takes back and faults in again
    // on the next use (steal time), and a drain right after a drop paid for it where one right after
    // a copy did not. Odd runs drain on the history first, even runs on the empty database first.
    const order = run % 2 === 1 ? ['history', 'empty'] : ['empty', 'history'];
    for (const key of DRAIN_SYSTEMS.filter((k) => ctx.only.includes(k))) {
      const made = {};
      try {
        for (const db of ['history', 'empty']) {
          const name = `b_${key.replace('-', '_')}_history_${db}_${run}`;
          made[db] = { name, ...(await copy(h, name, db === 'history' ? h.template : h.empty)) };
          await holdPurge(made[db].url);
        }
        const settled = await settle(HISTORY.settleMs);
        for (const db of order) {
          ctx.note(`history drain run ${run}: ${key} on the ${db} database`);
          const on = {
            server: h.server,
            made: made[db],
            tag: db,
            fields: { phase: 'drain', db, ...fields, settle: settled, position: order.indexOf(db) + 1 },
          };
          await runThroughput(ctx, 'history', key, run, { pgWrites: true, on });
          // The first drain's database is vacuumed before the second drain starts: otherwise
          // autovacuum cleans up after its 20,000 jobs inside the second drain's window (PostgreSQL's
          // CPU and WAL are counted cluster-wide), whichever database that is.
          if (db === order[0]) await vacuum(made[db].url);
        }
      } finally {
        for (const m of Object.values(made)) await h.server.dropDatabase(m.name);
      }
    }
  }
  if (HISTORY.phases.includes('reads')) {
    ctx.note(`history reads run ${run}`);
    const name = `b_history_reads_${run}`;
    const { url, copy_s } = await copy(h, name);
    try {
      await shiftCounters(url, Date.parse(h.info.loaded_at));
      const rollup = await rollupCopy(url);
      if (rollup) ctx.note(`history reads run ${run}: counters rolled up in ${rollup.seconds} s (${JSON.stringify(rollup)})`);
      await runReads(ctx, { server: h.server, url, run, calls: HISTORY.calls, fields: { ...fields, copy_s, rollup } });
    } finally {
      await h.server.dropDatabase(name);
    }
  }
  if (HISTORY.phases.includes('purge')) {
    for (const live of [false, true]) {
      ctx.note(`history purge run ${run}${live ? ', while deliveries run' : ''}`);
      const name = `b_history_purge${live ? '_live' : ''}_${run}`;
      const { url, copy_s } = await copy(h, name);
      try {
        const opts = { server: h.server, url, fromMs, run, fields: { ...fields, copy_s } };
        if (!live) await runPurgeQuiet(ctx, opts);
        else {
          await holdPurge(url);
          await runPurgeLive(ctx, { ...opts, logFile: `${ctx.resultsDir}/history-purge-live-${ctx.stamp}-${run}.log` });
        }
      } finally {
        await h.server.dropDatabase(name);
      }
    }
  }
  if (HISTORY.phases.includes('size') && run === 1) {
    const sizes = await historySizes(h.server.urlFor(h.template));
    const per = (x) => round(x / h.info.rows, 1);
    const tables = Object.fromEntries(
      Object.entries(sizes.tables).map(([t, s]) => [
        t,
        {
          ...s,
          per_delivery: { heap: per(s.heap), toast: per(s.toast), indexes: per(s.indexes), total: per(s.heap + s.toast + s.indexes) },
        },
      ]),
    );
    const total = Object.values(sizes.tables).reduce((a, s) => a + s.heap + s.toast + s.indexes, 0);
    ctx.emit({
      scenario: 'history',
      phase: 'size',
      run,
      ...fields,
      tables,
      history_bytes: total,
      bytes_per_delivery: per(total),
      database_bytes: sizes.database_bytes,
    });
  }
}

// ---------------------------------------------------------------- report

const mine = (rs, phase) => rs.filter((r) => r.scenario === 'history' && r.phase === phase);
const us = (r, k) => (r.cpu_s[k] * 1e6) / Math.max(1, r.jobs);
const gib = (b) => `${fmt(b / 2 ** 30, 2)} GiB`;

function drainRows(rs) {
  const drains = mine(rs, 'drain');
  const out = [];
  for (const key of DRAIN_SYSTEMS) {
    const of = (db) => drains.filter((r) => r.system === key && r.db === db);
    if (of('history').length === 0 && of('empty').length === 0) continue;
    const cpu = (db) => ['worker', 'pg', 'receiver'].map((k) => fmt(median(of(db).map((r) => us(r, k))))).join(' / ');
    const w = (db, k) => median(of(db).map((r) => r.pg_writes_per_job?.[k]));
    out.push({
      key,
      history: median(of('history').map((r) => r.jobs_per_s)),
      empty: median(of('empty').map((r) => r.jobs_per_s)),
      perRun: of('history').map((a) => ratio(a.jobs_per_s, of('empty').find((b) => b.run === a.run)?.jobs_per_s ?? null)),
      x: perRun(
        drains,
        (r) => r.system === key && r.db === 'history',
        (r) => r.system === key && r.db === 'empty',
        'jobs_per_s',
        ratio,
      ),
      cpuHistory: cpu('history'),
      cpuEmpty: cpu('empty'),
      writes: `${fmt(w('history', 'wal_bytes'))} / ${fmt(w('history', 'index_entries'), 1)} vs ${fmt(w('empty', 'wal_bytes'))} / ${fmt(w('empty', 'index_entries'), 1)}`,
      copy: median(of('history').map((r) => r.copy_s)),
      load: ['history', 'empty'].map((db) => fmt(median(of(db).map((r) => r.load_1m?.[0] ?? null)), 1)).join(' / '),
      steal: ['history', 'empty'].map((db) => fmt(median(of(db).map((r) => r.steal_pct ?? null)), 1)).join(' / '),
      timedOut: drains.some((r) => r.system === key && r.timed_out),
    });
  }
  return out;
}

function readRows(rs) {
  const reads = mine(rs, 'reads');
  const names = [...new Set(reads.map((r) => r.read))];
  return names.map((read) => {
    const of = reads.filter((r) => r.read === read);
    return {
      read,
      path: of[0].path,
      p50: median(of.map((r) => r.p50_ms)),
      p95: median(of.map((r) => r.p95_ms)),
      worstP95: Math.max(...of.map((r) => r.p95_ms)),
      max: Math.max(...of.map((r) => r.max_ms)),
      calls: of.reduce((a, r) => a + r.calls, 0),
      cpu: `${fmt(median(of.map((r) => r.cpu_ms_per_call.serve)), 2)} / ${fmt(median(of.map((r) => r.cpu_ms_per_call.pg)), 2)}`,
    };
  });
}

function purgeRows(rs) {
  const steps = [...new Set(mine(rs, 'purge').map((r) => r.step))].toSorted();
  return steps.map((step) => {
    const of = mine(rs, 'purge').filter((r) => r.step === step);
    const c = of[0].counts;
    const d = of[0].day_rows;
    return {
      step,
      seconds: median(of.map((r) => r.seconds)),
      worst: Math.max(...of.map((r) => r.seconds)),
      jobs: d ? `${fmt(d.completed)} / ${fmt(d.dead)}` : `${fmt(c.completed)} / ${fmt(c.dead)}`,
      attempts: d ? fmt(d.attempts) : 'n/a',
      events: fmt(c.events),
      counters: c.delivery_stats === undefined ? 'n/a' : fmt(c.delivery_stats),
      partitions: c.partitions ?? 'n/a',
    };
  });
}

function report(results) {
  const t = mine(results, 'template')[0];
  if (!t) return { md: null, json: { history: null } };
  const drains = drainRows(results);
  const reads = readRows(results);
  const purges = purgeRows(results);
  const live = mine(results, 'purge-live');
  const size = mine(results, 'size')[0];
  const md = [
    `## History at volume`,
    '',
    `${fmt(t.rows)} finished deliveries (${t.layout} layout, one in ${t.dead_every} dead), events from ${t.from.slice(0, 10)} to ${t.loaded_at.slice(0, 16)} UTC; ` +
      `template ${t.cached ? 'reused, loaded' : 'loaded'} ${t.loaded_at.slice(0, 16)} UTC in ${fmt(t.load_s)} s plus ${fmt(t.vacuum_s)} s of vacuum (freeze, analyze), ` +
      `database ${gib(t.sizes.database_bytes)}. PostgreSQL ${t.postgres} at its default memory settings; copies ${t.copy}.`,
    '',
  ];
  if (drains.length) {
    md.push(
      `| drain of the jobs per run | ${drains.map((d) => label(d.key)).join(' | ')} |`,
      `| --- | ${drains.map(() => '---').join(' | ')} |`,
    );
    const row = (name, f) => md.push(`| ${name} | ${drains.map(f).join(' | ')} |`);
    row('with the history, jobs/s (median)', (d) => `${fmt(d.history)}${d.timedOut ? ' †' : ''}`);
    row('empty database, jobs/s (median)', (d) => fmt(d.empty));
    row('history / empty, per run (median)', (d) => `${d.perRun.map((x) => rx(x)).join(', ')} (**${rx(d.x)}**)`);
    row('CPU µs/job worker / PostgreSQL / receiver, history', (d) => d.cpuHistory);
    row('CPU µs/job worker / PostgreSQL / receiver, empty', (d) => d.cpuEmpty);
    row('WAL bytes / index entries per job, history vs empty', (d) => d.writes);
    row('copy of the template, s', (d) => fmt(d.copy, 1));
    if (drains.some((d) => d.load !== 'n/a / n/a')) row('load average (1 min) at the start, history / empty (median)', (d) => d.load);
    if (drains.some((d) => d.steal !== 'n/a / n/a'))
      row('CPU stolen by the hypervisor during the drain, %, history / empty (median)', (d) => d.steal);
    md.push('');
  }
  if (reads.length) {
    md.push(
      '| operator read (HTTP, `serve`) | p50 ms | p95 ms (worst run) | max ms | calls | CPU ms/call serve / PostgreSQL |',
      '| --- | --- | --- | --- | --- | --- |',
    );
    for (const r of reads)
      md.push(
        `| ${r.read}: \`${r.path}\` | ${fmt(r.p50, 1)} | ${fmt(r.p95, 1)} (${fmt(r.worstP95, 1)}) | ${fmt(r.max, 1)} | ${r.calls} | ${r.cpu} |`,
      );
    md.push('');
    const loads = mine(results, 'reads')
      .map((r) => r.load_1m)
      .filter((x) => x !== undefined);
    if (loads.length) md.push(`Load average (1 min) as the reads ran: ${fmt(Math.min(...loads), 1)} to ${fmt(Math.max(...loads), 1)}.`, '');
    const rollups = [...new Map(mine(results, 'reads').map((r) => [r.run, r.rollup])).values()].filter(Boolean);
    if (rollups.length)
      md.push(
        `Before the reads, each copy's counters were folded as the \`stats_rollup\` runner does (one row per endpoint and minute): ` +
          `${rollups.map((r) => `${fmt(r.seconds, 1)} s for ${fmt(r.delivery_stats)} + ${fmt(r.job_counts)} slot rows, then ${fmt(r.vacuum_s, 1)} s of \`vacuum full\``).join('; ')}.`,
        '',
      );
  }
  if (purges.length) {
    md.push(
      '| purgeOld, one more day past retention | seconds (worst run) | jobs completed / dead | attempts | events | counter rows | partitions dropped |',
      '| --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const p of purges)
      md.push(
        `| call ${p.step} | ${fmt(p.seconds, 2)} (${fmt(p.worst, 2)}) | ${p.jobs} | ${p.attempts} | ${p.events} | ${p.counters} | ${p.partitions} |`,
      );
    md.push('');
  }
  for (const l of live) {
    md.push(
      `While acw default drained ${fmt(l.jobs)} deliveries (run ${l.run}): the ${l.steps.length} calls took ${l.steps.map((s) => fmt(s.seconds, 2)).join(', ')} s; ` +
        `deliveries/s before / during / after ${fmt(l.before.per_s)} / ${fmt(l.during.per_s)} / ${fmt(l.after.per_s)}, longest gap between two arrivals ` +
        `${fmt(l.before.max_gap_ms)} / ${fmt(l.during.max_gap_ms)} / ${fmt(l.after.max_gap_ms)} ms; ${fmt(l.delivered)} delivered (${fmt(l.distinct_ids)} distinct); ` +
        `worker warnings ${l.worker_warnings}, errors ${l.worker_errors}${l.worker_messages.length ? ` (${l.worker_messages.join('; ')})` : ''}.`,
      '',
    );
  }
  if (size) {
    md.push('| bytes per delivery kept | heap | toast and maps | indexes | total |', '| --- | --- | --- | --- | --- |');
    for (const [name, s] of Object.entries(size.tables)) {
      const p = s.per_delivery;
      md.push(
        `| ${name} (${s.partitions} partition${s.partitions === 1 ? '' : 's'}) | ${fmt(p.heap)} | ${fmt(p.toast)} | ${fmt(p.indexes)} | ${fmt(p.total)} |`,
      );
    }
    md.push(
      `| **all three** | | | | **${fmt(size.bytes_per_delivery)}** (${gib(size.history_bytes)}; database ${gib(size.database_bytes)}) |`,
      '',
    );
  }
  const targets = historyTargets({ drains, reads, purges, live });
  md.push('### History targets', '', targets.markdown);
  return { md: md.join('\n'), json: { history: { template: t, drains, reads, purges, live, size, targets: targets.list } } };
}

/** Issue 26's targets: drain >= 0.9x the empty database's, each read's p95 <= 50 ms, a day's purge <= 5 s. */
function historyTargets({ drains, reads, purges, live }) {
  const t = [];
  for (const d of drains) {
    t.push({
      name: `drain with the history, ${label(d.key)} (median of per-run ratios to the empty database)`,
      value: rx(d.x),
      goal: `>= ${TARGET.drain.toFixed(2)}x`,
      ok: d.x === null ? null : d.x >= TARGET.drain,
    });
  }
  for (const r of reads)
    t.push({
      name: `${r.read} p95 (median over runs)`,
      value: `${fmt(r.p95, 1)} ms`,
      goal: `<= ${TARGET.readP95Ms} ms`,
      ok: r.p95 <= TARGET.readP95Ms,
    });
  for (const p of purges)
    t.push({
      name: `purge call ${p.step} (median over runs)`,
      value: `${fmt(p.seconds, 2)} s`,
      goal: `<= ${TARGET.purgeS} s`,
      ok: p.seconds <= TARGET.purgeS,
    });
  for (const l of live) {
    t.push({
      name: `purge while delivering (run ${l.run}): no error on the live path`,
      value: `${l.worker_errors} errors, ${l.delivered} of ${l.jobs} delivered`,
      goal: '0 errors, all delivered',
      ok: l.worker_errors === 0 && l.delivered >= l.jobs,
    });
  }
  return { list: t, markdown: targetsMarkdown(t) };
}

export default { name: 'history', run: runHistory, report, meta: () => ({ history: HISTORY }) };
