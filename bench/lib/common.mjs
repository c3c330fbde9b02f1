// Shared by the orchestrator, the receiver and every worker child: the workload (topic, data,
// body), the signing secret, a clock that agrees across processes, and the peers' delivery
// handler (the same signed POST acw-webhooks sends, README.md#receiving-webhooks).
import { createHmac, randomUUID } from 'node:crypto';

export const SECRET = 'bench-secret-0123456789abcdef';
export const TOPIC = 'order.paid';
export const PEER_USER_AGENT = 'bench-peer/1';

/** Wall-clock milliseconds with sub-millisecond resolution, comparable between processes on one host. */
export function wallNow() {
  return performance.timeOrigin + performance.now();
}

/** The event data every system carries (about 150 bytes of JSON). */
export function eventData(seq) {
  return {
    seq,
    order_id: `ord_${String(seq).padStart(8, '0')}`,
    amount_cents: 1999 + (seq % 1000),
    currency: 'EUR',
    customer: { id: `cus_${(seq * 7919) % 100000}`, email: `customer${seq % 5000}@example.com` },
    items: 1 + (seq % 5),
  };
}

/** The delivery body, the same shape acw-webhooks builds at dispatch (README.md#receiving-webhooks). */
export function eventBody(seq, eventId = randomUUID(), occurredAt = new Date()) {
  return JSON.stringify({ event_id: eventId, topic: TOPIC, occurred_at: occurredAt.toISOString(), data: eventData(seq) });
}

/** What the peers' jobs carry: the body fixed at enqueue, like acw-webhooks' `webhook.deliver` payload. */
export function peerPayload(seq) {
  return { topic: TOPIC, body: eventBody(seq) };
}

/**
 * The fleet scenario's workload: event `seq` goes to endpoint `seq % endpoints` (its own topic
 * `fleet.eNNN` and path `/e/NNN`), and its delivery body is about 1 KiB (the data is padded).
 */
export const fleetName = (e) => `e${String(e).padStart(3, '0')}`;
export const fleetTopic = (e) => `fleet.${fleetName(e)}`;
export const fleetPath = (e) => `/e/${String(e).padStart(3, '0')}`;
export const FLEET_BODY_BYTES = 1024;
const FLEET_PAD = Math.max(
  0,
  FLEET_BODY_BYTES -
    JSON.stringify({
      event_id: randomUUID(),
      topic: fleetTopic(0),
      occurred_at: new Date().toISOString(),
      data: { ...eventData(10_000), endpoint: 0, pad: '' },
    }).length,
);

export function fleetData(seq, endpoints) {
  return { ...eventData(seq), endpoint: seq % endpoints, pad: 'x'.repeat(FLEET_PAD) };
}

/** The peers' fleet job: the body fixed at enqueue plus the path of its endpoint on the receiver. */
export function fleetPeerPayload(seq, endpoints) {
  const e = seq % endpoints;
  const topic = fleetTopic(e);
  const body = JSON.stringify({ event_id: randomUUID(), topic, occurred_at: new Date().toISOString(), data: fleetData(seq, endpoints) });
  return { topic, path: fleetPath(e), body };
}

/** Healthy events among the first `n` (those not routed to the `hanging` last endpoints). */
export function fleetHealthy(n, { endpoints, hanging }) {
  const healthyPerRound = endpoints - hanging;
  return Math.floor(n / endpoints) * healthyPerRound + Math.min(n % endpoints, healthyPerRound);
}

export function sign(secret, ts, body) {
  return `sha256=${createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex')}`;
}

/**
 * The peers' handler: sign and POST once through one shared keep-alive undici Agent configured
 * like acw-webhooks' delivery agent (64 sockets per origin, no pipelining), read the response,
 * throw on a non-2xx so the queue retries. A payload with a `path` (the fleet scenario) goes to
 * that path on the receiver's origin; its 10 s timeouts are acw's default endpoint `timeout`.
 */
export async function makeSignedPoster(url, { connections = 64 } = {}) {
  const { Agent, request } = await import('undici');
  const agent = new Agent({ connections, pipelining: 1, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 60_000 });
  const origin = new URL(url).origin;
  async function post(jobId, payload) {
    const ts = Math.floor(Date.now() / 1000);
    const res = await request(payload.path ? origin + payload.path : url, {
      dispatcher: agent,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': PEER_USER_AGENT,
        'X-ACW-Topic': payload.topic,
        'X-ACW-Event-Id': String(jobId),
        'X-ACW-Timestamp': String(ts),
        'X-ACW-Signature': sign(SECRET, ts, payload.body),
      },
      body: payload.body,
      idempotent: false,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
  }
  return { post, close: () => agent.close() };
}

export function median(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).toSorted((a, b) => a - b);
  if (v.length === 0) return null;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Peak resident set (VmHWM) of a process, MB, read from /proc while it still runs. */
export async function peakRssMb(pid) {
  const { readFile } = await import('node:fs/promises');
  try {
    const s = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /VmHWM:\s+(\d+) kB/.exec(s);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}
