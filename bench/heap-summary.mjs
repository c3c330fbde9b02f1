// `node bench/heap-summary.mjs FILE.heapsnapshot [top]`: the live heap of a V8 heap snapshot
// (BENCH_PROFILE=1 BENCH_HEAP_SNAPSHOT_AT_S=3 npm run bench) by constructor / string, self size.
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/heap-summary.mjs FILE.heapsnapshot [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const snap = JSON.parse(readFileSync(file, 'utf8'));
const meta = snap.snapshot.meta;
const F = meta.node_fields;
const types = meta.node_types[0];
const iType = F.indexOf('type');
const iName = F.indexOf('name');
const iSize = F.indexOf('self_size');
const stride = F.length;
const byKey = new Map();
let total = 0;
for (let i = 0; i < snap.nodes.length; i += stride) {
  const type = types[snap.nodes[i + iType]];
  const size = snap.nodes[i + iSize];
  total += size;
  const name = snap.strings[snap.nodes[i + iName]];
  const key = type === 'object' || type === 'closure' ? `${type}: ${name}` : `(${type})`;
  const e = byKey.get(key) ?? { size: 0, count: 0 };
  e.size += size;
  e.count++;
  byKey.set(key, e);
}
console.log(`${file}\nlive heap ${(total / 2 ** 20).toFixed(1)} MB`);
for (const [k, e] of [...byKey].toSorted((a, b) => b[1].size - a[1].size).slice(0, top)) {
  console.log(`${(e.size / 2 ** 20).toFixed(2).padStart(8)} MB ${String(e.count).padStart(8)}  ${k.slice(0, 100)}`);
}
