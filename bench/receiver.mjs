// The local webhook receiver: a child process of its own (so it never shares an event loop with
// the worker under test). Keep-alive HTTP on 127.0.0.1, answers 200 to every POST, records
// arrival times, counts distinct X-ACW-Event-Id values (duplicates show up), and checks the
// signature of one request in 50 (HMAC over `<ts>.` + body, README.md#receiving-webhooks).
// Driven over IPC by bench/run.mjs: {cmd:'reset', target, latency, failKey, failMs} / {cmd:'stats'} / {cmd:'exit'}.
// With `failKey`, deliveries of that ordering key (X-ACW-Ordering-Key) are answered 500 for
// `failMs` after the reset, and neither counted nor recorded (the ordered scenario's failing key).
import { createServer } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { SECRET, sign, wallNow } from './lib/common.mjs';

let count = 0;
let target = Infinity;
let latency = false;
let first = null;
let last = null;
let badSignatures = 0;
let checked = 0;
let ids = new Set();
let arrivals = new Map(); // seq -> wall ms (latency mode)
let reachedSent = false;
let failKey = null;
let failUntil = 0;
let failed = 0;

const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = wallNow();
    if (failKey !== null && at < failUntil && req.headers['x-acw-ordering-key'] === failKey) {
      failed++;
      res.writeHead(500, { 'content-type': 'text/plain', 'content-length': '4' });
      res.end('fail');
      return;
    }
    const body = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    res.end('ok');
    count++;
    if (first === null) first = at;
    last = at;
    const id = req.headers['x-acw-event-id'];
    if (id) ids.add(id);
    if (count % 50 === 1) {
      checked++;
      const ts = req.headers['x-acw-timestamp'];
      const got = Buffer.from(String(req.headers['x-acw-signature'] ?? ''));
      const want = Buffer.from(sign(SECRET, ts, body));
      if (got.length !== want.length || !timingSafeEqual(got, want)) badSignatures++;
    }
    if (latency) {
      try {
        const seq = JSON.parse(body).data?.seq;
        if (typeof seq === 'number' && !arrivals.has(seq)) arrivals.set(seq, at);
      } catch {
        // not ours
      }
    }
    if (!reachedSent && count >= target) {
      reachedSent = true;
      process.send?.({ type: 'reached', at, count });
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  process.send?.({ type: 'listening', port: server.address().port });
});

process.on('message', (m) => {
  if (m.cmd === 'reset') {
    count = 0;
    first = null;
    last = null;
    badSignatures = 0;
    checked = 0;
    ids = new Set();
    arrivals = new Map();
    target = m.target ?? Infinity;
    latency = m.latency === true;
    reachedSent = false;
    failKey = m.failKey ?? null;
    failUntil = wallNow() + (m.failMs ?? 0);
    failed = 0;
    process.send?.({ type: 'reset-ok' });
  } else if (m.cmd === 'stats') {
    process.send?.({
      type: 'stats',
      count,
      distinct: ids.size,
      first,
      last,
      checked,
      badSignatures,
      failed,
      arrivals: m.arrivals ? [...arrivals] : undefined,
    });
  } else if (m.cmd === 'exit') {
    server.closeAllConnections?.();
    server.close(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
