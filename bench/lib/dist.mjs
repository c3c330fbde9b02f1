// Where bench code loads acw-webhooks from. Other people rebuild dist/ while a long benchmark
// runs (`npm test` builds), so bench/run.mjs copies dist/, migrations/ and package.json into
// bench/.snapshot/<stamp>/ first and points BENCH_DIST at it: every child of one benchmark runs
// the same build. Without BENCH_DIST (tools run by hand), the live dist/ is used.
import { cpSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The build under test: BENCH_DIST when set, else the live dist/. */
export const distUrl = () => process.env.BENCH_DIST ?? pathToFileURL(join(ROOT, 'dist/')).href;

/**
 * import() a module of the build under test, e.g. `await dist('queue/transitions.js')`. BENCH_DIST
 * is read at each call, not at import: run.mjs sets it after this module is loaded (the snapshot).
 */
export function dist(rel) {
  return import(new URL(rel, distUrl()).href);
}

/** Copy the current build into bench/.snapshot/<stamp>/; returns its dist URL and a fingerprint. */
export function snapshotBuild(stamp) {
  const dir = join(ROOT, 'bench', '.snapshot', stamp);
  mkdirSync(dir, { recursive: true });
  cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'migrations'), join(dir, 'migrations'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  const h = createHash('sha256');
  const walk = (d) => {
    for (const f of readdirSync(d).toSorted()) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.(js|sql)$/.test(f)) h.update(f).update(readFileSync(p));
    }
  };
  walk(join(dir, 'dist'));
  walk(join(dir, 'migrations'));
  return { dir, distUrl: pathToFileURL(join(dir, 'dist/')).href, fingerprint: h.digest('hex').slice(0, 12) };
}
