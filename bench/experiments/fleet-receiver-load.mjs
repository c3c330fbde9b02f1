// Can the fleet receiver keep up? `node bench/experiments/fleet-receiver-load.mjs [concurrency] [requests]`
// starts bench/fleet-receiver.mjs alone (100 endpoints, none hanging, 100 ms answers, 5% first-attempt
// 500s) and POSTs 1 KiB signed bodies to it from `concurrency` keep-alive connections, as fast as
// the answers allow. A receiver that keeps up reaches about concurrency x 10 requests/s; the output
// also gives its CPU per request and its event loop delay.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { SECRET, fleetPeerPayload, sign } from '../lib/common.mjs';
import { cpuSeconds } from '../lib/proc.mjs';

const C = Number(process.argv[2] ?? 500);
const N = Number(process.argv[3] ?? 15_000);
const child = fork(fileURLToPath(new URL('../fleet-receiver.mjs', import.meta.url)), [], {
  env: { ...process.env, BENCH_FLEET_RECEIVER: JSON.stringify({ endpoints: 100, hanging: 0, delayMs: 100, failPct: 5 }) },
});
const next = (type) =>
  new Promise((resolve) => {
    const f = (m) => {
      if (m.type !== type) return;
      child.off('message', f);
      resolve(m);
    };
    child.on('message', f);
  });
const { port } = await next('listening');
child.send({ cmd: 'reset', target: Infinity });
await next('reset-ok');
const agent = new Agent({ connections: C });
const payloads = Array.from({ length: 1000 }, (_, i) => fleetPeerPayload(i, 100));
let sent = 0;
const cpu0 = cpuSeconds(child.pid);
const t0 = performance.now();
await Promise.all(
  Array.from({ length: C }, async () => {
    while (sent < N) {
      const i = sent++;
      const p = payloads[i % payloads.length];
      const ts = Math.floor(Date.now() / 1000);
      const res = await request(`http://127.0.0.1:${port}${p.path}`, {
        dispatcher: agent,
        method: 'POST',
        body: p.body,
        headers: { 'x-acw-event-id': `j${i}`, 'x-acw-timestamp': String(ts), 'x-acw-signature': sign(SECRET, ts, p.body) },
      });
      await res.body.text();
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
const cpu = cpuSeconds(child.pid) - cpu0;
child.send({ cmd: 'stats' });
const st = await next('stats');
console.log(
  JSON.stringify({
    concurrency: C,
    requests: N,
    req_per_s: Math.round(N / seconds),
    ideal_req_per_s: C * 10,
    receiver_cpu_us_per_req: Math.round((cpu * 1e6) / N),
    receiver_lag_ms: st.lag,
    completed: st.completed,
    answered_500: st.answered500,
    bad_signatures: st.badSignatures,
  }),
);
child.send({ cmd: 'exit' });
await agent.close();
