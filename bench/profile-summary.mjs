// `node bench/profile-summary.mjs FILE.cpuprofile [top]`: self time of a V8 CPU profile (from
// `BENCH_PROFILE=1 npm run bench`, written by `node --cpu-prof`) by function and by package, so a
// profile can be read without DevTools.
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/profile-summary.mjs FILE.cpuprofile [top]');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
// samples + timeDeltas: time attributed to the sampled node.
for (let i = 0; i < prof.samples.length; i++) {
  const id = prof.samples[i];
  self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);

function pkgOf(url) {
  if (!url) return '(native/V8)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.startsWith('node:')) return url.split('/')[0].replace(/^node:internal.*/, 'node:internal');
  const d = /\/dist\/(.+)$/.exec(url);
  if (d) return `dist/${d[1].split('/').slice(0, -1).join('/') || '.'}`;
  return url
    .replace(/^file:\/\//, '')
    .split('/')
    .slice(-2)
    .join('/');
}

const fn = new Map();
const pkg = new Map();
for (const [id, t] of self) {
  const n = byId.get(id);
  const cf = n.callFrame;
  const name = cf.functionName || '(anonymous)';
  const where = cf.url ? `${cf.url.replace(/^file:\/\/.*?\/(node_modules|dist|bench)\//, '$1/')}:${cf.lineNumber + 1}` : '';
  const key = ['(idle)', '(program)', '(garbage collector)'].includes(name) ? name : `${name} ${where}`;
  fn.set(key, (fn.get(key) ?? 0) + t);
  const p = ['(idle)', '(program)', '(garbage collector)'].includes(name) ? name : pkgOf(cf.url);
  pkg.set(p, (pkg.get(p) ?? 0) + t);
}
const idle = pkg.get('(idle)') ?? 0;
const busy = total - idle;
fn.delete('(idle)');
pkg.delete('(idle)');
const show = (m, n) =>
  [...m]
    .toSorted((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, t]) => `${((t / 1000).toFixed(0) + ' ms').padStart(9)} ${((100 * t) / busy).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n');
console.log(
  `${file}\nsampled ${(total / 1e6).toFixed(2)} s: idle ${(idle / 1e6).toFixed(2)} s, busy ${(busy / 1e6).toFixed(2)} s\n\n-- by package (share of busy time)\n${show(pkg, 25)}\n\n-- by function (self)\n${show(fn, top)}`,
);

// `BENCH_CALLERS=writev node bench/profile-summary.mjs FILE`: who calls a hot function (self time
// of that function, grouped by its call path, 6 frames up).
if (process.env.BENCH_CALLERS) {
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const paths = new Map();
  for (const [id, t] of self) {
    const n = byId.get(id);
    if (n.callFrame.functionName !== process.env.BENCH_CALLERS) continue;
    const chain = [];
    let p = parent.get(id);
    while (p !== undefined && chain.length < Number(process.env.BENCH_DEPTH ?? 6)) {
      const cf = byId.get(p).callFrame;
      chain.push(`${cf.functionName || '(anon)'}@${(cf.url || '').split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`);
      p = parent.get(p);
    }
    const k = chain.join(' < ');
    paths.set(k, (paths.get(k) ?? 0) + t);
  }
  console.log(`\n-- callers of ${process.env.BENCH_CALLERS}\n${show(paths, 15)}`);
}
