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
