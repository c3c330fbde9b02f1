// BENCH_AUTO_EXPLAIN=<ms> (bench/README.md#commands): PostgreSQL's auto_explain logs the plan of
// every statement, nested ones included, that ran for at least that long to the server's log
// (<cluster>/postgres.log, src/db/embedded.ts). After each throughput run the plans the run's
// database logged that read a table sequentially are grouped by statement and written beside the
// profiles: which statement of the hot path scans a live table, and with which plan.
import { closeSync, mkdirSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The threshold in ms, or null when off. */
export const AUTO_EXPLAIN_MS =
  process.env.BENCH_AUTO_EXPLAIN != null && process.env.BENCH_AUTO_EXPLAIN !== '' ? Number(process.env.BENCH_AUTO_EXPLAIN) : null;
if (AUTO_EXPLAIN_MS !== null && !(AUTO_EXPLAIN_MS >= 0)) throw new Error('BENCH_AUTO_EXPLAIN: a threshold in ms (0 logs every plan)');

/** The tables whose sequential scans are reported: the live jobs and what the claim and dispatch read. */
const WATCHED = new Set(['job_queue', 'endpoint_state', 'events', 'event_log']);

/** The sequential scans of watched tables in a plan tree (a partition counts under its parent's name prefix). */
function seqScans(node, out = []) {
  if (node['Node Type'] === 'Seq Scan') {
    const rel = node['Relation Name'] ?? '';
    const base = rel.replace(/_p\d{8}$/, '');
    if (WATCHED.has(base)) out.push({ table: base, rows: node['Plan Rows'], filter: node.Filter ?? null });
  }
  for (const child of node.Plans ?? []) seqScans(child, out);
  return out;
}

/** Server settings for startServer() when the knob is on (the database name goes into each line's prefix). */
export function autoExplainSettings() {
  if (AUTO_EXPLAIN_MS === null) return {};
  return {
    'auto_explain.log_min_duration': String(AUTO_EXPLAIN_MS),
    'auto_explain.log_nested_statements': 'on',
    'auto_explain.log_parameter_max_length': '200',
    'auto_explain.log_format': 'json',
    log_line_prefix: '%m [%p] <%d>',
  };
}

/** The log's size now: the start of a run's window. */
export function logMark(logFile) {
  return AUTO_EXPLAIN_MS === null ? null : (statSync(logFile, { throwIfNoEntry: false })?.size ?? 0);
}

function readFrom(file, from) {
  const size = statSync(file).size;
  const buf = Buffer.alloc(Math.max(0, size - from));
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buf, 0, buf.length, from);
  } finally {
    closeSync(fd);
  }
  return buf.toString('utf8');
}

/**
 * The plans `db` logged since `mark` that scan a watched table sequentially, grouped by statement
 * text, into `<profDir>/<name>.seqscans.json`; returns {plans, statements, seq_scans: {table: n}}
 * for the run's result, or null when off.
 */
export function dumpSeqScans(logFile, mark, db, profDir, name) {
  if (mark === null) return null;
  const text = readFrom(logFile, mark);
  // An entry is a line with the prefix and its continuation lines (PostgreSQL starts each with a tab).
  const entries = text.split(/\n(?!\t)/);
  const byQuery = new Map();
  const tables = {};
  let plans = 0;
  for (const e of entries) {
    const at = e.indexOf(`<${db}>LOG:  duration: `);
    const p = e.indexOf('plan:', at);
    if (at < 0 || p < 0) continue;
    plans++;
    let doc;
    try {
      doc = JSON.parse(e.slice(p + 5));
    } catch {
      continue;
    }
    const scans = seqScans(doc.Plan);
    if (scans.length === 0) continue;
    for (const s of scans) tables[s.table] = (tables[s.table] ?? 0) + 1;
    const key = String(doc['Query Text'] ?? '?')
      .replace(/\s+/g, ' ')
      .trim();
    const ms = Number(/duration: ([\d.]+) ms/.exec(e.slice(at))?.[1] ?? 0);
    const g = byQuery.get(key) ?? { count: 0, total_ms: 0, query: key, scans, parameters: doc['Query Parameters'] ?? null, plan: doc.Plan };
    g.count++;
    g.total_ms = Math.round((g.total_ms + ms) * 1000) / 1000;
    byQuery.set(key, g);
  }
  const statements = [...byQuery.values()].toSorted((a, b) => b.count - a.count);
  mkdirSync(profDir, { recursive: true });
  const file = join(profDir, `${name}.seqscans.json`);
  writeFileSync(file, `${JSON.stringify(statements, null, 2)}\n`);
  return { plans_logged: plans, seq_scan_plans: statements.reduce((a, s) => a + s.count, 0), statements: statements.length, tables, file };
}
