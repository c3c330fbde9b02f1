// `node bench/alloc-summary.mjs FILE [JOBS] [TOP]`: an allocation profile written by
// lib/alloc-profile.mjs, as bytes allocated per delivered job (JOBS, default 1: bytes in all), by
// package and by function (self).
import { readFileSync } from 'node:fs';

const [path, jobsArg, topArg] = process.argv.slice(2);
if (!path) {
  console.error('usage: node bench/alloc-summary.mjs FILE [JOBS] [TOP]');
  process.exit(2);
}
const jobs = Number(jobsArg ?? 1);
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(path, 'utf8'));

/** A frame's package: an npm package, a Node built-in module, a folder of dist/, or the file. */
function where(url) {
  if (!url) return '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const dist = /dist\/([^/]+)/.exec(url);
  return dist ? `dist/${dist[1]}` : url.split('/').slice(-2).join('/');
}

/** A frame's file, for the functions: within dist/ its path there, within a package its file. */
function file(url) {
  if (url?.startsWith('node:')) return url;
  const dist = /dist\/(.+)$/.exec(url ?? '');
  if (dist && !url.includes('node_modules')) return `dist/${dist[1]}`;
  return url ? `${where(url)}/${url.split('/').at(-1)}` : '(native)';
}

const byFunction = new Map();
const byPackage = new Map();
let total = 0;
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
const stack = [profile.head];
while (stack.length > 0) {
  const n = stack.pop();
  const cf = n.callFrame;
  const pkg = where(cf.url);
  add(byFunction, `${cf.functionName || '(anonymous)'} ${file(cf.url)}:${cf.lineNumber + 1}`, n.selfSize);
  add(byPackage, pkg, n.selfSize);
  total += n.selfSize;
  stack.push(...n.children);
}
const per = (v) => Math.round(v / jobs).toLocaleString('en-US');
const show = (m) =>
  [...m]
    .toSorted((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k, v]) => `${per(v).padStart(10)}  ${k}`)
    .join('\n');
console.log(`sampled allocations: ${(total / 1e6).toFixed(1)} MB, ${per(total)} bytes per job\n`);
console.log(`-- by package\n${show(byPackage)}\n`);
console.log(`-- by function (self)\n${show(byFunction)}`);
