// CPU per delivery of the webhook handler alone (sign + POST + response read + the webhook.attempt
// log line), old build against new build, interleaved A/B/A/B because the VM is shared.
//
//   node bench/experiments/send-cpu.mjs OLD_DIST NEW_DIST [rounds]
//   SEND_CPU_N=20000 SEND_CPU_CONCURRENCY=64 node bench/experiments/send-cpu.mjs ...
//   SEND_CPU_LOG=FILE keeps the log lines (appended) instead of sending them to /dev/null.
//   SEND_CPU_TRACE=new (or old) runs that build with tracing on (docs/operations.md#tracing), exporting
//   over OTLP/HTTP to the receiver child; each job carries a producer's traceparent, sampled for
//   SEND_CPU_TRACE_RATIO of them (default 1: all). `node bench/experiments/send-cpu.mjs dist dist 6`
//   with SEND_CPU_TRACE=new is the CPU tracing adds per delivery.
//
// Each measurement is a fresh child process: it loads createDeliverHandler / logAttempt /
// createDeliveryAgent / createLogger from the given dist, warms up, then runs N deliveries at
// concurrency C against a node:http keep-alive receiver (its own child process, answering 200 "ok"),
// logging at info to /dev/null, and reports process.cpuUsage() per delivery. Like the worker, each
// job gets its own AbortController. A dist directory needs a package.json next to it (version.js reads ../package.json).
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openSync } from 'node:fs';

const N = Number(process.env.SEND_CPU_N ?? 20_000);
const C = Number(process.env.SEND_CPU_CONCURRENCY ?? 64);
const WARMUP = Number(process.env.SEND_CPU_WARMUP ?? 3_000);
const role = process.argv[2];

function median(xs) {
  const s = xs.toSorted((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

if (role === '--receiver') {
  let count = 0;
  const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    if (req.url === '/v1/traces') {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
      return;
    }
    count++;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('ok');
    });
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: server.address().port }));
  // Dies with its parent, whatever way the parent goes.
  process.on('disconnect', () => {
    if (process.env.SEND_CPU_LOG) console.error(`receiver: ${count} requests`);
    process.exit(0);
  });
} else if (role === '--measure') {
  const dist = resolve(process.argv[3]);
  const port = Number(process.argv[4]);
  const imp = (p) => import(pathToFileURL(resolve(dist, p)).href);
  const { createDeliverHandler, logAttempt } = await imp('webhook/deliver.js');
  const { createDeliveryAgent } = await imp('webhook/send.js');
  const { createLogger } = await imp('log.js');
  const { pino } = await import('pino');
  const log = createLogger({
    level: 'info',
    destination: pino.destination({ dest: openSync(process.env.SEND_CPU_LOG ?? '/dev/null', 'a'), sync: false }),
  });
  const endpoint = {
    name: 'bench',
    url: `http://127.0.0.1:${port}/hook`,
    secret: 'bench-secret-0123456789',
    topics: ['*'],
    timeout: 10_000,
    connect_timeout: 5_000,
    max_in_flight: C,
    scheme: 'acw',
    headers: { 'x-tenant': 'bench' },
    enabled: true,
  };
  const endpoints = new Map([['bench', endpoint]]);
  // Builds with webhook/agents.js send through the endpoint's own pool (as the service does); older ones through one agent.
  const { EndpointAgents } = await import(pathToFileURL(resolve(dist, 'webhook/agents.js')).href).catch(() => ({}));
  const agent = EndpointAgents ? new EndpointAgents() : createDeliveryAgent({ connections: C });
  const agentFor = EndpointAgents ? (ep) => agent.agentFor(ep) : () => agent;
  const handler = createDeliverHandler({ endpoints: () => endpoints, agent, agentFor, recheckMs: 1000, log });
  const traced = process.env.SEND_CPU_TRACED === '1';
  const ratio = Number(process.env.SEND_CPU_TRACE_RATIO ?? 1);
  if (traced) {
    const { parseConfig } = await imp('config/index.js');
    const { startTracing } = await imp('tracing/runtime.js');
    const cfg = parseConfig({ tracing: { traces_endpoint: `http://127.0.0.1:${port}/v1/traces`, protocol: 'http/json' } });
    await startTracing({}, cfg, log);
  }
  const every = Math.max(1, Math.round(1 / ratio));
  const traceOf = (i) => ({
    traceparent: `00-${(i + 1).toString(16).padStart(32, '0')}-${(i + 1).toString(16).padStart(16, '0')}-${i % every === 0 ? '01' : '00'}`,
  });
  const body = JSON.stringify({
    event_id: '00000000-0000-4000-8000-000000000000',
    topic: 'bench.event',
    occurred_at: new Date().toISOString(),
    data: { n: 1, text: 'x'.repeat(200) },
  });
  let seq = 0;
  let failed = 0;
  const one = async () => {
    const i = seq++;
    const job = {
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      type: 'webhook.deliver',
      payload: traced ? { body, topic: 'bench.event', ...traceOf(i) } : { body, topic: 'bench.event' },
      attempts: 1,
      maxAttempts: 6,
      leaseToken: 't',
      leaseExpiresAt: Date.now() + 60_000,
      eventId: '00000000-0000-4000-8000-000000000000',
      endpoint: 'bench',
      createdAt: new Date(),
      endpointUnknownSince: null,
    };
    const ctl = new AbortController();
    const outcome = await handler(job, { signal: ctl.signal });
    if (outcome?.kind !== 'complete') failed++;
    logAttempt(log, { job, outcome }, true, undefined);
  };
  const run = async (count) => {
    let left = count;
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (left > 0) {
          left--;
          await one();
        }
      }),
    );
  };
  await run(WARMUP);
  globalThis.gc?.();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run(N);
  const cpu = process.cpuUsage(cpu0);
  const secs = (performance.now() - t0) / 1000;
  process.send?.({ cpuUsPerDelivery: (cpu.user + cpu.system) / N, userUs: cpu.user / N, sysUs: cpu.system / N, perSec: N / secs, failed });
  await agent.close();
  process.exit(0);
} else {
  const [oldDist, newDist] = [process.argv[2], process.argv[3]];
  const rounds = Number(process.argv[4] ?? 4);
  if (!oldDist || !newDist) {
    console.error('usage: node bench/experiments/send-cpu.mjs OLD_DIST NEW_DIST [rounds]');
    process.exit(2);
  }
  const self = new URL(import.meta.url).pathname;
  const recv = fork(self, ['--receiver']);
  const { port } = await new Promise((res) => recv.once('message', res));
  const measure = (dist, name) =>
    new Promise((res, rej) => {
      const child = fork(self, ['--measure', dist, String(port)], {
        env: { ...process.env, SEND_CPU_TRACED: process.env.SEND_CPU_TRACE === name ? '1' : '0' },
      });
      child.once('message', res);
      child.once('exit', (code) => (code ? rej(new Error(`measure ${dist} exited ${code}`)) : undefined));
    });
  process.on('exit', () => recv.kill());
  const results = { old: [], new: [] };
  for (let r = 0; r < rounds; r++) {
    for (const [name, dist] of r % 2 === 0
      ? [
          ['old', oldDist],
          ['new', newDist],
        ]
      : [
          ['new', newDist],
          ['old', oldDist],
        ]) {
      const m = await measure(dist, name);
      results[name].push(m);
      console.log(
        JSON.stringify({
          round: r,
          build: name,
          cpu_us: +m.cpuUsPerDelivery.toFixed(1),
          user_us: +m.userUs.toFixed(1),
          sys_us: +m.sysUs.toFixed(1),
          per_s: Math.round(m.perSec),
          failed: m.failed,
        }),
      );
    }
  }
  const summary = (name) => ({
    cpu_us: +median(results[name].map((m) => m.cpuUsPerDelivery)).toFixed(1),
    per_s: Math.round(median(results[name].map((m) => m.perSec))),
  });
  const o = summary('old');
  const n = summary('new');
  console.log(
    JSON.stringify({
      N,
      concurrency: C,
      rounds,
      median_old: o,
      median_new: n,
      cpu_change_pct: +((n.cpu_us / o.cpu_us - 1) * 100).toFixed(1),
    }),
  );
  recv.kill();
}
