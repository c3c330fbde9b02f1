import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm run bench` runs the scenarios of bench/scenarios/index.mjs; a module left out of it, or a
// README that lists another default, goes unnoticed until someone benchmarks.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BENCH = join(ROOT, 'bench');

type Result = Record<string, unknown>;
interface Scenario {
  name: string;
  systems?: string[];
  run: unknown;
  report?: (results: Result[], meta: Result) => { md: string | null; json: Record<string, unknown> };
}

const load = async <T>(rel: string): Promise<T> => (await import(pathToFileURL(join(BENCH, rel)).href)) as T;

describe('bench/scenarios/', () => {
  it('registers every scenario module once, under its file name', async () => {
    const { SCENARIOS } = await load<{ SCENARIOS: Scenario[] }>('scenarios/index.mjs');
    const files = readdirSync(join(BENCH, 'scenarios'))
      .filter((f) => f.endsWith('.mjs') && f !== 'index.mjs')
      .map((f) => f.replace(/\.mjs$/, ''))
      .toSorted();
    expect(SCENARIOS.map((s) => s.name).toSorted()).toEqual(files);
    for (const f of files) {
      const mod = await load<{ default: Scenario }>(`scenarios/${f}.mjs`);
      expect(SCENARIOS).toContain(mod.default);
    }
  });

  it('gives each scenario a run(), and systems that exist', async () => {
    const { SCENARIOS } = await load<{ SCENARIOS: Scenario[] }>('scenarios/index.mjs');
    const { ALL } = await load<{ ALL: string[] }>('systems/index.mjs');
    for (const s of SCENARIOS) {
      const unknown = (s.systems ?? []).filter((k) => !ALL.includes(k));
      expect({ name: s.name, run: typeof s.run, unknown }).toEqual({ name: s.name, run: 'function', unknown: [] });
    }
  });

  it('matches the default BENCH_SCENARIOS of bench/README.md', async () => {
    const { SCENARIOS } = await load<{ SCENARIOS: Scenario[] }>('scenarios/index.mjs');
    const readme = readFileSync(join(BENCH, 'README.md'), 'utf8');
    const row = /^\| `BENCH_SCENARIOS` \| `([^`]+)` \|/m.exec(readme);
    expect(row?.[1]).toBe(SCENARIOS.map((s) => s.name).join(','));
  });

  it('writes no section for scenarios that did not run', async () => {
    const { REPORTS } = await load<{ REPORTS: Array<NonNullable<Scenario['report']>> }>('scenarios/index.mjs');
    for (const report of REPORTS) expect(report([], { runs: 1 }).md).toBeNull();
  });
});

/** A slow-endpoints drain result, as lib/endpoints.mjs emits it. */
const drain = (system: string, concurrency: number | null, run: number, perS: number): Result => ({
  scenario: 'slow-endpoints',
  phase: 'drain',
  system,
  concurrency,
  run,
  completed: 1000,
  drain_per_s: perS,
  seconds: 1000 / perS,
  ceiling_per_s: concurrency ? concurrency * 10 : 3200,
  cpu_s: { worker: 0.1, pg: 0.2, receiver: 0.05 },
  pg_writes_per_job: { wal_bytes: 4000, wal_fpi_bytes: 100, index_entries: 12 },
  peak_rss_mb: 100,
});

describe('slow-endpoints report', () => {
  it('compares acw with graphile-worker run by run, then takes the median', async () => {
    const mod = await load<{ default: Scenario }>('scenarios/slow-endpoints.mjs');
    const rs = [
      drain('acw-default', null, 1, 2000),
      drain('graphile-tuned', 500, 1, 1000),
      drain('acw-default', null, 2, 1500),
      drain('graphile-tuned', 500, 2, 3000),
      drain('acw-default', null, 3, 3000),
      drain('graphile-tuned', 500, 3, 2000),
    ];
    const out = mod.default.report!(rs, { runs: 3 });
    // Per-run ratios 2.0, 0.5 and 1.5: the median is 1.5 (the ratio of the medians would be 1.0).
    expect(out.md).toContain(
      '| slow endpoints drain, acw default >= 1.2x graphile-worker tuned, concurrency 500 (median of per-run ratios) | 1.50x | >= 1.20x | yes |',
    );
    expect(out.md).toContain('2,000 (1.50x; 63%)');
    expect(out.md).toContain('4,000 (100) / 12.0');
  });
});

/** History scenario results, as bench/scenarios/history.mjs and its lib/history-*.mjs emit them. */
const historyDrain = (system: string, db: 'history' | 'empty', run: number, perS: number): Result => ({
  scenario: 'history',
  phase: 'drain',
  system,
  db,
  run,
  jobs: 1000,
  jobs_per_s: perS,
  copy_s: 1,
  cpu_s: { worker: 0.2, pg: 0.3, receiver: 0.05 },
  pg_writes_per_job: { wal_bytes: 4000, index_entries: 16 },
});
const historyTemplate: Result = {
  scenario: 'history',
  phase: 'template',
  run: 1,
  rows: 1000,
  layout: 'history',
  dead_every: 50,
  from: '2026-11-25T00:00:00.000Z',
  loaded_at: '2026-12-02T03:00:00.000Z',
  load_s: 10,
  vacuum_s: 2,
  sizes: { tables: {}, database_bytes: 1e9 },
  cached: false,
  copy: 'file_copy',
  postgres: '18.4',
};
const historyRead = (run: number, p95: number): Result => ({
  scenario: 'history',
  phase: 'reads',
  run,
  read: 'stats 24h',
  path: '/v1/stats?window=24h',
  calls: 50,
  p50_ms: p95 / 2,
  p95_ms: p95,
  max_ms: p95 * 2,
  cpu_ms_per_call: { serve: 1, pg: 2 },
});
const historyPurge = (run: number, seconds: number): Result => ({
  scenario: 'history',
  phase: 'purge',
  run,
  step: 1,
  seconds,
  day_rows: { completed: 980, dead: 20, attempts: 1000 },
  counts: { completed: 980, dead: 20, attempts: 1000, partitions: 4, events: 0, delivery_stats: 1440 },
});

describe('history report', () => {
  it('compares the drain with the empty database run by run, and holds each read and purge to its target', async () => {
    const mod = await load<{ default: Scenario }>('scenarios/history.mjs');
    const rs = [
      historyTemplate,
      historyDrain('acw-default', 'history', 1, 900),
      historyDrain('acw-default', 'empty', 1, 1000),
      historyDrain('acw-default', 'history', 2, 400),
      historyDrain('acw-default', 'empty', 2, 800),
      historyDrain('acw-default', 'history', 3, 1900),
      historyDrain('acw-default', 'empty', 3, 2000),
      historyRead(1, 40),
      historyRead(2, 70),
      historyRead(3, 45),
      historyPurge(1, 0.5),
      historyPurge(2, 6),
      historyPurge(3, 0.7),
    ];
    const out = mod.default.report!(rs, { runs: 3 });
    // Per-run ratios 0.90, 0.50 and 0.95: the median is 0.90 (the ratio of the medians would be 0.95).
    expect(out.md).toContain('| history / empty, per run (median) | 0.90x, 0.50x, 0.95x (**0.90x**) |');
    expect(out.md).toContain(
      '| drain with the history, acw-webhooks default (median of per-run ratios to the empty database) | 0.90x | >= 0.90x | yes |',
    );
    // p95 over runs 40, 70, 45: the median (45) holds, the worst run is shown beside it.
    expect(out.md).toContain('| stats 24h: `/v1/stats?window=24h` | 22.5 | 45.0 (70.0) | 140.0 | 150 | 1.00 / 2.00 |');
    expect(out.md).toContain('| stats 24h p95 (median over runs) | 45.0 ms | <= 50 ms | yes |');
    expect(out.md).toContain('| call 1 | 0.70 (6.00) | 980 / 20 | 1,000 | 0 | 1,440 | 4 |');
    expect(out.md).toContain('| purge call 1 (median over runs) | 0.70 s | <= 5 s | yes |');
  });
});
