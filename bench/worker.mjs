// One system's worker, in a child process of its own (so its peak RSS is its own and it never
// shares an event loop with the receiver or the orchestrator). Configured through BENCH_WORKER
// (JSON: system, variant, mode, url, receiverUrl, target); driven over IPC:
//   -> {type:'loaded'}  modules imported, nothing running yet
//   <- {cmd:'go'}       start working (the orchestrator's clock starts here)
//   -> {type:'reached'} (no-op mode) the handler ran `target` times
//   <- {cmd:'spans'}    (cfg.spans) -> {type:'spans', data}: what lib/spans.mjs recorded
//   <- {cmd:'stop'}     graceful stop, then exit
import { wallNow } from './lib/common.mjs';

const cfg = JSON.parse(process.env.BENCH_WORKER ?? '{}');
const spans = cfg.spans ? (await import('./lib/spans.mjs')).installSpans(cfg.spans) : null;
const mod = await import(`./systems/${cfg.system}.mjs`);
let handled = 0;
let reached = false;
const onHandled = (k) => {
  handled += k;
  if (!reached && handled >= cfg.target) {
    reached = true;
    process.send?.({ type: 'reached', at: wallNow(), handled });
  }
};
const worker = await mod.prepareWorker({ ...cfg, onHandled });
// Where the memory goes: the peak of each part of process.memoryUsage(), sampled every 100 ms.
const memPeak = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
const sampleMem = () => {
  const m = process.memoryUsage();
  for (const k of Object.keys(memPeak)) memPeak[k] = Math.max(memPeak[k], m[k]);
};
setInterval(sampleMem, 100).unref();
process.on('message', (m) => {
  if (m.cmd === 'go') {
    worker.start().then(
      (info) => process.send?.({ type: 'started', at: wallNow(), ...info }),
      (err) => {
        console.error(err);
        process.exit(1);
      },
    );
  } else if (m.cmd === 'spans') {
    process.send?.({ type: 'spans', data: spans?.() ?? null });
  } else if (m.cmd === 'count') {
    process.send?.({ type: 'count', handled });
  } else if (m.cmd === 'stop') {
    const hardStop = setTimeout(() => process.exit(3), 20_000);
    worker
      .stop()
      .catch((err) => console.error('stop failed:', err))
      .finally(() => {
        clearTimeout(hardStop);
        sampleMem();
        const mem = Object.fromEntries(Object.entries(memPeak).map(([k, v]) => [k, Math.round(v / 2 ** 20)]));
        process.send?.({ type: 'stopped', handled, maxRssMb: process.resourceUsage().maxRSS / 1024, mem }, () => process.exit(0));
      });
  }
});
process.on('disconnect', () => process.exit(2));
process.send?.({ type: 'loaded' });
