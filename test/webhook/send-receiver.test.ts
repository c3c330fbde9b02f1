import type { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDeliveryAgent, sendWebhook, type SendOptions } from '../../src/webhook/send.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let agent: Agent;
let receiver: Receiver;
beforeAll(() => {
  agent = createDeliveryAgent();
});
afterAll(async () => {
  await agent.close();
});
beforeEach(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await receiver.close();
});

function send(over: Partial<SendOptions> = {}) {
  return sendWebhook({
    agent,
    url: `${receiver.url}/hook`,
    headers: { 'content-type': 'application/json' },
    body: '{"hello":"world"}',
    timeoutMs: 2_000,
    ...over,
  });
}

describe('sendWebhook against a real receiver', () => {
  it('delivers one POST with the exact body and headers', async () => {
    const res = await send({ headers: { 'content-type': 'application/json', 'X-ACW-Topic': 'a.b' } });
    expect(res.outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(res.responseBody).toBe('ok');
    expect(receiver.requests).toHaveLength(1);
    const [req] = receiver.requests;
    expect(req?.method).toBe('POST');
    expect(req?.url).toBe('/hook');
    expect(req?.body.toString()).toBe('{"hello":"world"}');
    expect(req?.headers['x-acw-topic']).toBe('a.b');
    // Header-name case survives on the wire (seed 003's receiver reads exact names).
    expect(req?.rawHeaders).toContain('X-ACW-Topic');
  });

  it('times out a receiver that never answers, not before timeoutMs', async () => {
    receiver.setResponder(() => ({ hang: true }));
    const started = Date.now();
    // The receiver never answers: only the timeout can end this (a missing one hangs the test).
    const res = await send({ timeoutMs: 300 });
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(res.durationMs).toBeGreaterThanOrEqual(290);
  });

  it('a 2xx whose body then stalls is delivered (the receiver took it), within the timeout, keeping what was read', async () => {
    receiver.setResponder(() => ({ status: 200, hangAfterHeaders: true, body: 'partial' }));
    // The body never ends: only the timeout ends the read, and the 2xx stands.
    const res = await send({ timeoutMs: 300 });
    expect(res.outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(res.responseBody).toBe('partial');
  });

  it('a 5xx whose body stalls times out as a retry, keeping the status', async () => {
    receiver.setResponder(() => ({ status: 503, hangAfterHeaders: true, body: 'partial' }));
    const res = await send({ timeoutMs: 300 });
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'timeout', status: 503 });
  });

  it('does not follow a 302: the receiver sees exactly one request', async () => {
    receiver.setResponder((req) =>
      req.url === '/hook' ? { status: 302, headers: { location: `${receiver.url}/moved` } } : { status: 200 },
    );
    const res = await send();
    expect(res.outcome).toMatchObject({ kind: 'permanent', status: 302, errorKind: 'redirect' });
    // No sleep needed: a followed redirect is sent, and recorded here, before send() could resolve.
    expect(receiver.requests.map((r) => r.url)).toEqual(['/hook']);
  });

  it('truncates a 10 MB response body to 4 KiB and does not read the rest', async () => {
    // 10 MB, and then the body never ends: reading past the first 4 KiB would end in a timeout.
    receiver.setResponder(() => ({ status: 500, hangAfterHeaders: true, body: Buffer.alloc(10 * 1024 * 1024, 'x') }));
    const res = await send({ timeoutMs: 20_000 });
    expect(res.outcome).toMatchObject({ kind: 'retry', status: 500, errorKind: 'http_status' });
    expect(res.responseBody).toBe('x'.repeat(4096));
  });

  it('removes NUL bytes from the kept response body', async () => {
    receiver.setResponder(() => ({ status: 400, body: Buffer.from('bad\u0000 input\u0000!') }));
    const res = await send();
    expect(res.outcome).toMatchObject({ kind: 'permanent', status: 400 });
    expect(res.responseBody).toBe('bad input!');
  });

  it('reports a caller abort (shutdown, lease lost) as aborted, not timeout', async () => {
    receiver.setResponder(() => ({ hang: true }));
    const ctl = new AbortController();
    void receiver.waitForRequests(1).then(() => ctl.abort(new Error('lease lost')));
    // The timeout is longer than the test's: only the abort can end this.
    const res = await send({ timeoutMs: 60_000, signal: ctl.signal });
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'aborted' });
    expect(res.outcome.kind !== 'delivered' && res.outcome.message).toContain('lease lost');
  });

  it('leaves no abort listener on a long-lived caller signal', async () => {
    const ctl = new AbortController();
    let added = 0;
    let removed = 0;
    const add = ctl.signal.addEventListener.bind(ctl.signal);
    const remove = ctl.signal.removeEventListener.bind(ctl.signal);
    ctl.signal.addEventListener = (...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    };
    ctl.signal.removeEventListener = (...args: Parameters<typeof remove>) => {
      removed++;
      remove(...args);
    };
    for (let i = 0; i < 5; i++) await send({ signal: ctl.signal });
    expect(added).toBe(5);
    expect(removed).toBe(5);
  });

  it('reuses keep-alive connections for sequential deliveries', async () => {
    for (let i = 0; i < 6; i++) await send();
    expect(receiver.requests).toHaveLength(6);
    // The socket returns to the pool a tick after the body ends, so two may alternate; never six.
    expect(new Set(receiver.requests.map((r) => r.remotePort)).size).toBeLessThanOrEqual(2);
  });
});
