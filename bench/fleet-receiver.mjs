// The fleet scenario's receivers: one child process serving `endpoints` paths /e/000, /e/001, …
// on 127.0.0.1 (keep-alive). A healthy endpoint answers every POST after `delayMs` (a timer, no
// CPU); the first attempt of `failPct` % of the jobs it sees gets a 500, every later attempt a 200.
// The last `hanging` endpoints never answer: the request stays open until the client gives up (its
// timeout) or the next reset. Per job (`X-ACW-Event-Id`) it keeps the first arrival, the event's
// `seq` (from the body) and the first 200, so duplicates and retries show. It checks the signature
// of one request in 50 (README.md#receiving-webhooks) and measures its own event loop delay, so a
// run can show the receiver was not the bottleneck.
// Driven over IPC by bench/run.mjs: {cmd:'reset', target, kind} / {cmd:'stats', arrivals} / {cmd:'exit'}.
// kind 'completed': 'reached' when `target` healthy jobs got their 200; kind 'first': when `target`
// healthy jobs arrived once (first attempts).
import { createServer } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SECRET, sign, wallNow } from './lib/common.mjs';

const cfg = JSON.parse(process.env.BENCH_FLEET_RECEIVER ?? '{}');
const ENDPOINTS = cfg.endpoints ?? 100;
const HANGING = cfg.hanging ?? 2;
const DELAY_MS = cfg.delayMs ?? 100;
const FAIL_PCT = cfg.failPct ?? 5;
const PATH = /^\/e\/(\d{3})$/;

// The histogram holds whole sampling intervals (the resolution plus the delay): the delay is the excess.
const LAG_RESOLUTION_MS = 10;
const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
lag.enable();
/** Responses of the hanging endpoints, held open. */
const held = new Set();
let connections = 0;
/** Requests received and not yet answered (healthy endpoints: waiting out their delay). */
let open = 0;
let state = fresh({});
// In flight over time: sampled every 10 ms once the run's first request arrived, so a run shows
// whether the sender kept its slots full (the slow-endpoints ceiling) or let them drain between claims.
const SAMPLE_MS = 10;
setInterval(() => {
  if (state.firstAt !== null && !state.reachedSent) state.inFlight.push(open);
}, SAMPLE_MS).unref();

function fresh({ target = Infinity, kind = 'completed' }) {
  return {
    target,
    kind,
    reachedSent: false,
    requests: 0,
    answered200: 0,
    answered500: 0,
    hangingArrivals: 0,
    unknown: 0,
    abandoned: 0,
    jobs: new Map(), // X-ACW-Event-Id -> { seq, first, done, attempts }
    seen: 0,
    completed: 0,
    duplicates200: 0,
    firstAt: null,
    lastFirst: null,
    lastCompletion: null,
    checked: 0,
    badSignatures: 0,
    peakConnections: connections,
    inFlight: [],
  };
}

function reached(s, at) {
  if (s.reachedSent || s !== state) return;
  const n = s.kind === 'first' ? s.seen : s.completed;
  if (n < s.target) return;
  s.reachedSent = true;
  process.send?.({ type: 'reached', at, count: n });
}

const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => {
  const s = state;
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = wallNow();
    s.requests++;
    const m = PATH.exec(req.url ?? '');
    const e = m ? Number(m[1]) : -1;
    if (e < 0 || e >= ENDPOINTS || req.method !== 'POST') {
      s.unknown++;
      res.writeHead(404, { 'content-length': '0' });
      res.end();
      return;
    }
    if (e >= ENDPOINTS - HANGING) {
      // Hangs: no answer. The client's timeout (or the next reset) closes it.
      s.hangingArrivals++;
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    const body = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
    const id = String(req.headers['x-acw-event-id'] ?? '');
    let job = s.jobs.get(id);
    let fail = false;
    if (!job) {
      const seq = /"seq":(\d+)/.exec(body);
      job = { seq: seq ? Number(seq[1]) : -1, first: at, done: null, attempts: 0 };
      s.jobs.set(id, job);
      const n = ++s.seen;
      // Exactly failPct % of first attempts, spread evenly; a retry always succeeds.
      fail = Math.floor((n * FAIL_PCT) / 100) > Math.floor(((n - 1) * FAIL_PCT) / 100);
      if (s.firstAt === null) s.firstAt = at;
      s.lastFirst = at;
      reached(s, at);
    }
    job.attempts++;
    open++;
    res.on('close', () => open--);
    if (s.requests % 50 === 1) {
      s.checked++;
      const ts = req.headers['x-acw-timestamp'];
      const got = Buffer.from(String(req.headers['x-acw-signature'] ?? ''));
      const want = Buffer.from(sign(SECRET, ts, body));
      if (got.length !== want.length || !timingSafeEqual(got, want)) s.badSignatures++;
    }
    setTimeout(() => {
      if (res.destroyed) {
        s.abandoned++; // the client gave up before the answer
        return;
      }
      if (fail) {
        res.writeHead(500, { 'content-type': 'text/plain', 'content-length': '4' });
        res.end('fail');
        s.answered500++;
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('ok');
      s.answered200++;
      if (job.done !== null) {
        s.duplicates200++;
        return;
      }
      const done = wallNow();
      job.done = done;
      s.completed++;
      s.lastCompletion = done;
      reached(s, done);
    }, DELAY_MS);
  });
});
server.on('connection', (sock) => {
  connections++;
  if (connections > state.peakConnections) state.peakConnections = connections;
  sock.on('close', () => connections--);
});

server.listen(0, '127.0.0.1', () => {
  process.send?.({ type: 'listening', port: server.address().port });
});

/** Mean and percentiles of the in-flight samples (and the samples themselves, when asked). */
function inFlightSummary(samples, withTimeline) {
  if (samples.length === 0) return null;
  const sorted = samples.toSorted((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return {
    sample_ms: SAMPLE_MS,
    mean: Math.round(mean * 10) / 10,
    p10: at(0.1),
    p50: at(0.5),
    p90: at(0.9),
    ...(withTimeline ? { timeline: samples } : {}),
  };
}

const ms = (ns) => Math.max(0, Math.round((ns / 1e6 - LAG_RESOLUTION_MS) * 100) / 100);

process.on('message', (m) => {
  if (m.cmd === 'reset') {
    // Whatever the last run left hanging is let go (its clients see a closed connection).
    for (const res of held) res.destroy();
    held.clear();
    state = fresh(m);
    lag.reset();
    process.send?.({ type: 'reset-ok' });
  } else if (m.cmd === 'stats') {
    const s = state;
    let retried = 0;
    for (const j of s.jobs.values()) if (j.attempts > 1) retried++;
    process.send?.({
      type: 'stats',
      requests: s.requests,
      seen: s.seen,
      completed: s.completed,
      retried,
      answered200: s.answered200,
      answered500: s.answered500,
      duplicates200: s.duplicates200,
      hangingArrivals: s.hangingArrivals,
      held: held.size,
      unknown: s.unknown,
      abandoned: s.abandoned,
      firstAt: s.firstAt,
      lastFirst: s.lastFirst,
      lastCompletion: s.lastCompletion,
      checked: s.checked,
      badSignatures: s.badSignatures,
      peakConnections: s.peakConnections,
      inFlight: inFlightSummary(s.inFlight, m.timeline === true),
      lag: { p50_ms: ms(lag.percentile(50)), p99_ms: ms(lag.percentile(99)), max_ms: ms(lag.max) },
      // [seq, first arrival] of every healthy job seen (the steady phase's latencies).
      arrivals: m.arrivals ? [...s.jobs.values()].map((j) => [j.seq, j.first]) : undefined,
    });
  } else if (m.cmd === 'exit') {
    for (const res of held) res.destroy();
    server.closeAllConnections?.();
    server.close(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
