import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm run bench` loads acw-webhooks from dist/ by path and name (`await dist('queue/transitions.js')`),
// outside the type checker: a module split or a rename breaks it only when someone benchmarks.
// This reads every such import in bench/ and checks the names against the build npm test just made.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BENCH = join(ROOT, 'bench');

function benchScripts(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return e.name === 'results' || e.name.startsWith('.') ? [] : benchScripts(join(dir, e.name));
    return e.name.endsWith('.mjs') ? [join(dir, e.name)] : [];
  });
}

/** `const { a, b: c } = await dist('x.js')` and `(await dist('x.js')).name` (or `imp`, send-cpu's loader), as [module, names]. */
function distImports(text: string): Array<[string, string[]]> {
  const out: Array<[string, string[]]> = [];
  for (const m of text.matchAll(/\{([^{}]*)\}\s*=\s*await (?:dist|imp)\('([^']+)'\)/g)) {
    out.push([
      m[2]!,
      m[1]!
        .split(',')
        .map((n) => n.split(':')[0]!.trim())
        .filter(Boolean),
    ]);
  }
  for (const m of text.matchAll(/\(await (?:dist|imp)\('([^']+)'\)\)\.(\w+)/g)) out.push([m[1]!, [m[2]!]]);
  return out;
}

describe('bench/ imports from dist/', () => {
  const found = benchScripts(BENCH).flatMap((file) =>
    distImports(readFileSync(file, 'utf8')).map(([mod, names]) => ({ file: relative(ROOT, file), mod, names })),
  );

  it('finds the imports it checks', () => {
    expect(found.length).toBeGreaterThan(10);
  });

  it.each(found.map((f) => [`${f.file}: ${f.mod}`, f] as const))('%s exports what is used', async (_name, f) => {
    const mod = (await import(pathToFileURL(join(ROOT, 'dist', f.mod)).href)) as Record<string, unknown>;
    const missing = f.names.filter((n) => mod[n] === undefined);
    expect({ file: f.file, module: f.mod, missing }).toEqual({ file: f.file, module: f.mod, missing: [] });
  });
});
