#!/usr/bin/env node
// Draws docs/images/trace-retry.svg from real exported spans (docs/operations.md#tracing): a
// service on the embedded PostgreSQL (or DATABASE_URL) exports to an OTLP/HTTP (JSON) receiver on
// 127.0.0.1 kept by this script; one notify goes to an endpoint that fails its first attempt and
// takes the second, and to one that takes the first. The picture shows the notify's trace and the
// linked trace of each attempt on one time axis. Run `npm run build` first.
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, Service } from '../dist/index.js';
import { createHttpServer, listenHttp } from '../dist/http/server.js';

const out = new URL('../docs/images/trace-retry.svg', import.meta.url);

function listen(handler) {
  const server = createServer(handler);
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

const spans = [];
const otlp = await listen((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
let firstSeen = false;
const seen = { delivered: 0 };
const flaky = await listen((req, res) => {
  req.resume();
  req.on('end', () => {
    if (!firstSeen) {
      firstSeen = true;
      res.writeHead(503).end('busy');
      return;
    }
    seen.delivered++;
    res.writeHead(200).end('ok');
  });
});
const steady = await listen((req, res) => {
  req.resume();
  req.on('end', () => {
    seen.delivered++;
    setTimeout(() => res.writeHead(200).end('ok'), 30);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'acw-trace-diagram-'));
const token = 'diagram-token-0123456789abcdef';
const config = parseConfig(
  {
    database: { data_dir: dir, url: process.env.DATABASE_URL ?? '' },
    log: { level: 'warn' },
    server: { auth: { users: [{ name: 'shop', role: 'service', token }] } },
    jobs: { retry: { base: '400ms', max: '1s', jitter: 0 } },
    tracing: { traces_endpoint: `${otlp.url}/v1/traces`, protocol: 'http/json', service_name: 'acw-webhooks' },
    notify: {
      webhook: {
        endpoints: [
          { name: 'billing', url: `${flaky.url}/hooks`, secret: 'diagram-secret-1', topics: ['order.*'], propagate_trace: true },
          { name: 'crm', url: `${steady.url}/hooks`, secret: 'diagram-secret-2', topics: ['order.*'] },
        ],
      },
    },
  },
  process.env,
);
const svc = await Service.start({ config, mode: 'serve' });
const app = await createHttpServer(svc, { mode: 'serve' });
const { url } = await listenHttp(app, '127.0.0.1:0');
const res = await fetch(`${url}/v1/notify`, {
  method: 'POST',
  headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
  body: JSON.stringify({ topic: 'order.paid', data: { order: 1042 } }),
});
if (res.status !== 202) throw new Error(`notify answered ${res.status}`);
const deadline = Date.now() + 10_000;
while (seen.delivered < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 300));
await app.close();
await svc.stop();
for (const s of [otlp, flaky, steady]) s.server.close();
rmSync(dir, { recursive: true, force: true });

// The notify's trace: the server span and its producer span; then each attempt linked to it.
const attr = (s, k) => {
  const v = s.attributes?.find((a) => a.key === k)?.value;
  return v === undefined ? undefined : (v.stringValue ?? v.intValue ?? v.boolValue);
};
const producer = spans.find((s) => s.kind === 4);
const server = spans.find((s) => s.spanId === producer.parentSpanId);
const attempts = spans
  .filter((s) => s.kind === 3 && s.links?.some((l) => l.spanId === producer.spanId))
  .toSorted((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)));
const rows = [
  {
    s: server,
    label: `${server.name}`,
    sub: `trace ${server.traceId.slice(0, 8)}… · server · ${attr(server, 'http.response.status_code')}`,
  },
  {
    s: producer,
    label: producer.name,
    sub: `producer · event ${String(attr(producer, 'messaging.message.id')).slice(0, 8)}… · ${attr(producer, 'acw.jobs')} jobs`,
    indent: 1,
  },
  ...attempts.map((s) => ({
    s,
    label: `POST ${attr(s, 'acw.endpoint')} · attempt ${attr(s, 'acw.attempt')}`,
    sub: `trace ${s.traceId.slice(0, 8)}… · client · ${attr(s, 'http.response.status_code')} · ${attr(s, 'acw.outcome')}`,
    linked: true,
  })),
];
const t0 = BigInt(server.startTimeUnixNano);
const ms = (n) => Number(BigInt(n) - t0) / 1e6;
const end = Math.max(...rows.map((r) => ms(r.s.endTimeUnixNano)));
const W = 900;
const left = 330;
const scale = (W - left - 70) / end;
const rowH = 46;
const top = 40;
const H = top + rows.length * rowH + 40;
const x = (t) => left + t * scale;
const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;');
const parts = [
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
  `<rect width="${W}" height="${H}" fill="#fff"/>`,
  `<text x="10" y="20" font-size="14" font-weight="bold">One notify, its trace and the linked trace of each delivery attempt (${Math.round(end)} ms)</text>`,
];
rows.forEach((r, i) => {
  const y = top + i * rowH;
  const a = ms(r.s.startTimeUnixNano);
  const b = ms(r.s.endTimeUnixNano);
  const failed = r.s.status?.code === 2;
  const color = r.linked ? (failed ? '#d9534f' : '#5cb85c') : '#337ab7';
  if (i === 2) parts.push(`<line x1="0" x2="${W}" y1="${y - 4}" y2="${y - 4}" stroke="#ccc" stroke-dasharray="4 3"/>`);
  parts.push(`<text x="${10 + (r.indent ?? 0) * 14}" y="${y + 14}">${esc(r.label)}</text>`);
  parts.push(`<text x="${10 + (r.indent ?? 0) * 14}" y="${y + 29}" fill="#666" font-size="11">${esc(r.sub)}</text>`);
  parts.push(`<rect x="${x(a)}" y="${y + 6}" width="${Math.max(2, (b - a) * scale)}" height="18" rx="3" fill="${color}"/>`);
  parts.push(`<text x="${x(b) + 4}" y="${y + 19}" fill="#333" font-size="11">${(b - a).toFixed(1)} ms</text>`);
  if (r.linked) {
    const py = top + 1 * rowH + 24;
    const px = x(ms(producer.endTimeUnixNano));
    parts.push(
      `<path d="M${px},${py} C${px + 20},${y} ${x(a) - 20},${y + 15} ${x(a)},${y + 15}" fill="none" stroke="#999" stroke-dasharray="3 3"/>`,
    );
  }
});
parts.push(
  `<text x="10" y="${H - 12}" fill="#666" font-size="11">Dashed: span links (each attempt is a trace of its own, linked to the producer span). Red: the attempt answered 503 and was retried.</text>`,
);
parts.push('</svg>');
writeFileSync(out, `${parts.join('\n')}\n`);
console.log(`wrote ${out.pathname}: ${rows.length} spans over ${Math.round(end)} ms`);
