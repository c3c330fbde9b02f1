// Preloaded into acw's worker child (BENCH_ACW_NODE_OPTIONS="--import ./bench/lib/alloc-profile.mjs"):
// V8's sampling heap profiler for the whole life of the process, objects that the garbage collector
// already took included, so the profile says where the allocations come from (what the collector
// then has to clear), not what is still alive. Written at exit to
// $BENCH_ALLOC_DIR/alloc-<pid>.json (default the system's temporary directory); summarised by
// `node bench/alloc-summary.mjs FILE JOBS`.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const session = new Session();
session.connect();
session.post('HeapProfiler.enable');
session.post('HeapProfiler.startSampling', {
  samplingInterval: 16_384,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
// A session on the process's own thread answers synchronously, so this still runs within 'exit'.
process.on('exit', () => {
  session.post('HeapProfiler.stopSampling', (err, res) => {
    if (!err) writeFileSync(join(process.env.BENCH_ALLOC_DIR ?? tmpdir(), `alloc-${process.pid}.json`), JSON.stringify(res.profile));
  });
});
