#!/usr/bin/env node
// Mutation testing (`npm run test:mutation [area ...]`, CONTRIBUTING.md#test-strength): one Stryker
// run per area of stryker.config.mjs, one after the other, each with only the tests of its area;
// then the score of each area and of all of them together, from the JSON reports in
// reports/mutation/. Exits 1 when the score of the areas run is under 80%.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const TARGET = 80;

// stryker.config.mjs picks its area from this variable at import; any valid one lets us read AREAS.
process.env['ACW_MUTATION_AREA'] ??= 'net';
const { AREAS } = await import('../stryker.config.mjs');

const asked = process.argv.slice(2);
for (const a of asked) {
  if (!(a in AREAS)) {
    console.error(`unknown area ${JSON.stringify(a)}: expected some of ${Object.keys(AREAS).join(', ')}`);
    process.exit(2);
  }
}
const areas = asked.length > 0 ? asked : Object.keys(AREAS);

/** Stryker's counts: detected = killed + timeout; the score is detected over valid mutants (no errors, no ignored). */
function counts(report) {
  const c = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, errors: 0 };
  for (const file of Object.values(report.files)) {
    for (const m of file.mutants) {
      if (m.status === 'Killed') c.killed++;
      else if (m.status === 'Timeout') c.timeout++;
      else if (m.status === 'Survived') c.survived++;
      else if (m.status === 'NoCoverage') c.noCoverage++;
      else if (m.status === 'CompileError' || m.status === 'RuntimeError') c.errors++;
    }
  }
  return c;
}

const score = (c) => {
  const valid = c.killed + c.timeout + c.survived + c.noCoverage;
  return valid === 0 ? 100 : (100 * (c.killed + c.timeout)) / valid;
};

const rows = [];
const started = Date.now();
for (const name of areas) {
  const t0 = Date.now();
  console.log(`== mutation testing: ${name} (${AREAS[name].mutate.join(' ')})`);
  const run = spawnSync('npx', ['stryker', 'run'], { cwd: root, stdio: 'inherit', env: { ...process.env, ACW_MUTATION_AREA: name } });
  if (run.status !== 0) {
    console.error(`stryker failed for area ${name} (exit ${run.status ?? run.signal})`);
    process.exit(1);
  }
  const report = JSON.parse(readFileSync(`${root}reports/mutation/${name}.json`, 'utf8'));
  rows.push({ name, minutes: (Date.now() - t0) / 60_000, ...counts(report) });
}

const total = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, errors: 0 };
for (const r of rows) for (const k of Object.keys(total)) total[k] += r[k];
const line = (name, c, minutes) =>
  `${name.padEnd(10)} ${score(c).toFixed(2).padStart(6)}%  killed ${c.killed}, timeout ${c.timeout}, survived ${c.survived}, no coverage ${c.noCoverage}  ${minutes.toFixed(1)} min`;
console.log('\n== mutation score (reports in reports/mutation/<area>.html)');
for (const r of rows) console.log(line(r.name, r, r.minutes));
console.log(line('all', total, (Date.now() - started) / 60_000));
if (score(total) < TARGET) {
  console.error(`mutation score ${score(total).toFixed(2)}% is under ${TARGET}%`);
  process.exit(1);
}
