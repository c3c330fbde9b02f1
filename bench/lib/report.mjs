// Numbers and tables for the results: rounding, formatting, ratios, medians over runs and the
// markdown of a targets table. Every report in bench/reports/ and bench/scenarios/ uses these.
import { median } from './common.mjs';

export { median, percentile } from './common.mjs';

export function round(x, d) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null;
  const f = 10 ** d;
  return Math.round(x * f) / f;
}

export const fmt = (x, d = 0) =>
  x === null || x === undefined ? 'n/a' : Number(x).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
export const pct = (x) => (x === null || x === undefined ? 'n/a' : `${Math.round(x * 100)}%`);
export const ratio = (a, b) => (a === null || b === null || a === undefined || b === undefined || b === 0 ? null : a / b);
export const rx = (x) => (x === null ? 'n/a' : `${x.toFixed(2)}x`);
export const ge = (x, y) => (x === null || y === null ? null : x >= y);

/** The median of `f` (a field name or a function) over the results that pass `filter`. */
export const medianWhere = (rs, filter, f) => median(rs.filter(filter).map((r) => (typeof f === 'function' ? f(r) : r[f])));

/**
 * The median over runs of cmp(a[field], b[field]), a and b the results of one run that pass `isA`
 * and `isB`. Ratios are taken within each run (the two ran back to back, under the same load),
 * then the median: on a shared box that is steadier than a ratio of two medians.
 */
export function perRun(rs, isA, isB, field, cmp) {
  const runs = [...new Set(rs.filter((r) => isA(r) || isB(r)).map((r) => r.run))];
  return median(
    runs.map((run) => {
      const a = rs.find((r) => r.run === run && isA(r));
      const b = rs.find((r) => r.run === run && isB(r));
      return a && b ? cmp(a[field], b[field]) : null;
    }),
  );
}

/**
 * A targets table: `list` of {name, value, goal, ok} (ok null when it could not be decided,
 * shown as `undecided`).
 */
export function targetsMarkdown(list, undecided = 'not measured') {
  const md = ['| target | measured | goal | holds |', '| --- | --- | --- | --- |'];
  for (const x of list) md.push(`| ${x.name} | ${x.value} | ${x.goal} | ${x.ok === null ? undecided : x.ok ? 'yes' : '**no**'} |`);
  return md.join('\n');
}
