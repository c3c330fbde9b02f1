import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Every write to the job tables (job_queue, job_history, and `jobs`, the view over them) lives in
// src/queue/transitions.ts and the files under src/queue/transitions/ (docs/operations.md#job-states),
// so a rule or a new column is written once. This reads every file under src/ for a statement that
// writes them elsewhere. The exceptions: the purge's deletes of a day it cuts (src/runners/purge.ts),
// and the upgrade from the old layout (src/history/upgrade.ts), which moves old rows in as they are.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SRC = join(ROOT, 'src');
const HOME_FILE = 'src/queue/transitions.ts';
const HOME_DIR = 'src/queue/transitions/';
const isHome = (path: string) => path === HOME_FILE || path.startsWith(HOME_DIR);

// Any case and whitespace, with or without a schema or quotes; an alias after the name is fine.
const TABLE = String.raw`(?:"?\w+"?\.)?"?(?:jobs|job_queue|job_history(?:_\w+)?)"?\b`;
// Besides the home (isHome), the files allowed each kind of write.
const WRITES: ReadonlyArray<[string, RegExp, readonly string[]]> = [
  ['update jobs', new RegExp(String.raw`\bupdate\s+(?:only\s+)?${TABLE}`, 'gi'), []],
  ['insert into jobs', new RegExp(String.raw`\binsert\s+into\s+${TABLE}`, 'gi'), ['src/history/upgrade.ts']],
  ['delete from jobs', new RegExp(String.raw`\bdelete\s+from\s+(?:only\s+)?${TABLE}`, 'gi'), ['src/runners/purge.ts']],
];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

const sources = files(SRC).map((f) => ({ path: relative(ROOT, f).split(sep).join('/'), text: readFileSync(f, 'utf8') }));

const sourceOf = (path: string) => sources.find((s) => s.path === path)?.text ?? '';
const home = sources.filter((s) => isHome(s.path));

function hits(re: RegExp, text: string): number[] {
  return [...text.matchAll(re)].map((m) => text.slice(0, m.index).split('\n').length);
}

describe('one home for job transitions', () => {
  it.each(WRITES)('no file under src/ but the allowed ones contains "%s"', (_name, re, allowed) => {
    const outside = sources
      .filter((s) => !isHome(s.path) && !allowed.includes(s.path))
      .flatMap((s) => hits(re, s.text).map((line) => `${s.path}:${line}`));
    expect(outside).toEqual([]);
  });

  it('finds the statements where they belong', () => {
    const inHome = (re: RegExp) => home.reduce((n, s) => n + hits(re, s.text).length, 0);
    expect(home.map((s) => s.path)).toContain(HOME_FILE);
    expect(home.length).toBeGreaterThan(1);
    expect(inHome(WRITES[0]![1])).toBeGreaterThan(5);
    // insertJobs (its general insert, and the one for jobs whose ids are all known), insertWithJobs,
    // the finish into job_history, the requeue from it, and the insert of keyed jobs (ordering.ts).
    expect(inHome(WRITES[1]![1])).toBe(6);
    expect(hits(WRITES[1]![1], sourceOf('src/history/upgrade.ts')).length).toBe(2);
  });
});
