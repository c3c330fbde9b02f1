// sendWebhook's own undici handler: response bodies that arrive in pieces, and attempts that wait
// in undici's queue for a connection (their budget starts when the request goes out).
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RESPONSE_BODY_LIMIT, createDeliveryAgent, sendWebhook } from '../../src/webhook/send.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A server whose handler writes the response itself, piece by piece. */
async function startWriter(
  write: (res: ServerResponse) => Promise<void>,
): Promise<{ url: string; server: Server; open: Set<ServerResponse> }> {
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      open.add(res);
      res.on('close', () => open.delete(res));
      res.on('error', () => {});
      void write(res).catch(() => {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server, open };
}

async function stop(s: { server: Server; open: Set<ServerResponse> }): Promise<void> {
  for (const res of s.open) res.destroy();
  s.server.closeAllConnections();
  await new Promise<void>((resolve) => s.server.close(() => resolve()));
}

const post = (agent: ReturnType<typeof createDeliveryAgent>, url: string, over: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
  sendWebhook({
    agent,
    url,
    headers: { 'content-type': 'application/json' },
    body: '{}',
    timeoutMs: over.timeoutMs ?? 5_000,
    signal: over.signal,
  });

describe('sendWebhook reading a response body in pieces', () => {
  let agent: ReturnType<typeof createDeliveryAgent>;
  beforeEach(() => {
    agent = createDeliveryAgent();
  });
  afterEach(async () => {
    await agent.destroy();
  });

  it('keeps a body under 4 KiB that arrives in several chunks, whole', async () => {
    const w = await startWriter(async (res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (const c of ['a', 'b', 'c']) {
        res.write(c.repeat(1000));
        await sleep(20);
      }
      res.end('!');
    });
    try {
      const res = await post(agent, w.url);
      expect(res.outcome).toEqual({ kind: 'delivered', status: 200 });
      expect(res.responseBody).toBe(`${'a'.repeat(1000)}${'b'.repeat(1000)}${'c'.repeat(1000)}!`);
    } finally {
      await stop(w);
    }
  });

  it('decodes a UTF-8 character split across two chunks', async () => {
    const e = Buffer.from('é', 'utf8');
    const w = await startWriter(async (res) => {
      res.writeHead(400);
      res.write(Buffer.concat([Buffer.from('caf'), e.subarray(0, 1)]));
      await sleep(20);
      res.end(Buffer.concat([e.subarray(1), Buffer.from(' refused')]));
    });
    try {
      const res = await post(agent, w.url);
      expect(res.outcome).toMatchObject({ kind: 'permanent', status: 400 });
      expect(res.responseBody).toBe('café refused');
    } finally {
      await stop(w);
    }
  });

  it('answers from the first 4 KiB of a chunked body without waiting for the rest, and the agent delivers again afterwards', async () => {
    let n = 0;
    const w = await startWriter(async (res) => {
      if (++n > 1) {
        res.end('ok');
        return;
      }
      res.writeHead(503, { 'retry-after': '7' });
      res.write('x'.repeat(3000));
      await sleep(20);
      res.write('y'.repeat(3000));
      // ... and never ends.
    });
    try {
      const res = await post(agent, w.url, { timeoutMs: 5_000 });
      // The response's own outcome, not a timeout (the body never ends, so waiting for it would
      // end in one): the status and its Retry-After were complete.
      expect(res.outcome).toMatchObject({ kind: 'retry', status: 503, errorKind: 'http_status', retryAfterMs: 7_000 });
      expect(res.responseBody).toBe('x'.repeat(3000) + 'y'.repeat(RESPONSE_BODY_LIMIT - 3000));
      expect((await post(agent, w.url)).outcome).toEqual({ kind: 'delivered', status: 200 });
    } finally {
      await stop(w);
    }
  });
});

describe('sendWebhook while undici still queues the request', () => {
  let receiver: Receiver;
  let agent: ReturnType<typeof createDeliveryAgent>;
  beforeEach(async () => {
    receiver = await startReceiver();
    // One connection: a hanging first request keeps the second one queued.
    agent = createDeliveryAgent({ connections: 1 });
  });
  afterEach(async () => {
    await agent.destroy();
    await receiver.close();
  });

  it('does not count the wait for a local connection against its budget', async () => {
    receiver.setResponder((req) => (req.url === '/first' ? { delayMs: 500, status: 200, body: 'ok' } : { status: 200, body: 'ok' }));
    const first = post(agent, `${receiver.url}/first`);
    await receiver.waitForRequests(1);
    const second = await post(agent, `${receiver.url}/second`, { timeoutMs: 250 });
    expect(second.outcome).toEqual({ kind: 'delivered', status: 200 });
    // It did wait longer than its budget for the one connection (else this proves nothing).
    expect(second.durationMs).toBeGreaterThan(250);
    expect((await first).outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(receiver.requests.map((r) => r.url)).toEqual(['/first', '/second']);
  });

  it('starts its budget once the request goes out: queued, then hanging, it times out a budget after its turn came', async () => {
    receiver.setResponder((req) => (req.url === '/first' ? { delayMs: 300, status: 200, body: 'ok' } : { hang: true }));
    const first = post(agent, `${receiver.url}/first`);
    await receiver.waitForRequests(1);
    const started = Date.now();
    // The first request hangs until aborted below: a timeout that did not cover the wait for the
    // connection would never fire, and this would hang.
    const second = await post(agent, `${receiver.url}/second`, { timeoutMs: 200 });
    expect(second.outcome).toMatchObject({ kind: 'retry', errorKind: 'timeout' });
    // The first answer came about 300 ms after it arrived, then the second's 200 ms ran.
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect((await first).outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(receiver.requests.map((r) => r.url)).toEqual(['/first', '/second']);
  });

  it('reports a caller abort while queued as aborted at once, and never sends that request', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    receiver.setResponder(async (req) => (req.url === '/first' ? (await gate, { status: 200, body: 'ok' }) : { status: 200, body: 'ok' }));
    let firstDone = false;
    const first = post(agent, `${receiver.url}/first`).finally(() => (firstDone = true));
    await receiver.waitForRequests(1);
    const ctl = new AbortController();
    const second = post(agent, `${receiver.url}/second`, { signal: ctl.signal });
    ctl.abort(new Error('lease lost'));
    const res = await second;
    // At once: while the request ahead of it still holds the only connection.
    expect(firstDone).toBe(false);
    release();
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'aborted' });
    expect(res.outcome.kind !== 'delivered' && res.outcome.message).toContain('lease lost');
    expect((await first).outcome).toEqual({ kind: 'delivered', status: 200 });
    // The connection is free again and the aborted request was never written to it.
    expect((await post(agent, `${receiver.url}/third`)).outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(receiver.requests.map((r) => r.url)).toEqual(['/first', '/third']);
  });
});

describe('sendWebhook request validation', () => {
  it('makes a non-http(s) URL a permanent invalid_request', async () => {
    const agent = createDeliveryAgent();
    try {
      const res = await post(agent, 'ftp://127.0.0.1/hook');
      expect(res.outcome).toMatchObject({ kind: 'permanent', errorKind: 'invalid_request' });
      // Refused before any request went out: no status, an empty response body. (Its durationMs was
      // asserted to be 0 here, which a loaded Node 24 run measured as 1.)
      expect(res.outcome).not.toHaveProperty('status');
      expect(res.responseBody).toBe('');
    } finally {
      await agent.close();
    }
  });
});
