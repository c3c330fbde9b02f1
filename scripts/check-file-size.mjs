// No source file over 400 lines in src/, dashboard/src/ or bench/ (CONTRIBUTING.md#the-layout):
// a file that grows past it holds more than one responsibility. Run by `npm test`; exits 1 naming
// each file over the limit.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAX_LINES = 400;
const SOURCE = /\.(ts|mts|tsx|js|mjs)$/;
/** Folders that hold no code of ours: dependencies, built output, the bench's caches and copies. */
const SKIP = new Set(['node_modules', 'dist', '.cache', '.snapshot', 'results']);

function* sources(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) {
      if (!SKIP.has(e.name)) yield* sources(join(dir, e.name));
    } else if (SOURCE.test(e.name)) yield join(dir, e.name);
  }
}

/** The files under `dirs` (relative to `root`) with more than `max` lines, longest first. */
export function oversized(root, dirs, max = MAX_LINES) {
  const over = [];
  for (const d of dirs) {
    for (const f of sources(join(root, d))) {
      const text = readFileSync(f, 'utf8');
      const lines = text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      if (lines > max) over.push({ file: relative(root, f), lines });
    }
  }
  return over.toSorted((a, b) => b.lines - a.lines);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL('../', import.meta.url));
  const over = oversized(root, ['src', 'dashboard/src', 'bench']);
  for (const o of over) console.error(`${o.file}: ${o.lines} lines, over ${MAX_LINES}: split it by responsibility`);
  process.exit(over.length > 0 ? 1 : 0);
}
