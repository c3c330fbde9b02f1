import { MockAgent, errors, type Dispatcher } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDeliveryAgent, sendWebhook } from '../../src/webhook/send.js';

const ORIGIN = 'https://hooks.example.test';
const HOOK_URL = `${ORIGIN}/in`;
const HEADERS = { 'content-type': 'application/json', 'X-ACW-Signature': 'sha256=00' };

let agent: MockAgent;
beforeEach(() => {
  agent = new MockAgent();
  agent.disableNetConnect();
});
afterEach(async () => {
  await agent.close();
});

function send(via: Dispatcher = agent, extra: { timeoutMs?: number; signal?: AbortSignal; url?: string } = {}) {
  return sendWebhook({
    agent: via,
    url: extra.url ?? HOOK_URL,
    headers: HEADERS,
    body: '{"a":1}',
    timeoutMs: extra.timeoutMs ?? 2_000,
    signal: extra.signal,
  });
}

function reply(status: number, body = '', headers: Record<string, string> = {}): void {
  agent.get(ORIGIN).intercept({ path: '/in', method: 'POST' }).reply(status, body, { headers });
}

describe('sendWebhook with a mocked endpoint', () => {
  it('POSTs the body and headers and reports 2xx as delivered', async () => {
    let seen: { method: string; body: unknown; headers: unknown } | undefined;
    agent
      .get(ORIGIN)
      .intercept({ path: '/in', method: 'POST' })
      .reply((opts) => {
        seen = { method: opts.method, body: opts.body, headers: opts.headers };
        return { statusCode: 204, data: '' };
      });
    const res = await send();
    expect(res.outcome).toEqual({ kind: 'delivered', status: 204 });
    expect(seen?.method).toBe('POST');
    expect(seen?.body).toBe('{"a":1}');
    expect(seen?.headers).toMatchObject({ 'X-ACW-Signature': 'sha256=00' });
    expect(res.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('keeps the response body', async () => {
    reply(200, 'thanks');
    expect(await send()).toMatchObject({ outcome: { kind: 'delivered', status: 200 }, responseBody: 'thanks' });
  });

  it.each([400, 401, 403, 404, 410, 422])('makes %i permanent', async (status) => {
    reply(status, 'no');
    expect((await send()).outcome).toMatchObject({ kind: 'permanent', status, errorKind: 'http_status' });
  });

  it.each([408, 425, 429, 500, 502, 503, 504])('retries %i', async (status) => {
    reply(status);
    expect((await send()).outcome).toMatchObject({ kind: 'retry', status, errorKind: 'http_status' });
  });

  it.each([301, 302, 307, 308])('makes a %i redirect permanent and does not follow it', async (status) => {
    reply(status, '', { location: `${ORIGIN}/elsewhere` });
    expect((await send()).outcome).toMatchObject({ kind: 'permanent', status, errorKind: 'redirect' });
    // Following it would have hit the un-mocked path and failed with a MockNotMatchedError instead.
  });

  it('honours Retry-After seconds on 429', async () => {
    reply(429, '', { 'retry-after': '17' });
    expect((await send()).outcome).toMatchObject({ kind: 'retry', status: 429, retryAfterMs: 17_000 });
  });

  it('honours a Retry-After HTTP date on 503', async () => {
    reply(503, '', { 'retry-after': new Date(Date.now() + 90_000).toUTCString() });
    const out = (await send()).outcome;
    expect(out.kind).toBe('retry');
    const ms = out.kind === 'retry' ? out.retryAfterMs : undefined;
    expect(ms).toBeGreaterThan(85_000);
    expect(ms).toBeLessThanOrEqual(90_000);
  });

  it('times out a slow endpoint as a retryable timeout', async () => {
    // Answered late, a 200 would be `delivered`: the timeout outcome is the proof it fired first.
    agent.get(ORIGIN).intercept({ path: '/in', method: 'POST' }).reply(200, 'late').delay(2_000);
    const res = await send(agent, { timeoutMs: 100 });
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'timeout' });
  });

  it.each([
    ['dns', Object.assign(new Error('getaddrinfo ENOTFOUND hooks.example.test'), { code: 'ENOTFOUND' })],
    ['connect', Object.assign(new Error('connect ECONNRESET'), { code: 'ECONNRESET' })],
    ['timeout', new errors.HeadersTimeoutError()],
  ])('reports a transport failure as retry %s', async (errorKind, err) => {
    agent.get(ORIGIN).intercept({ path: '/in', method: 'POST' }).replyWithError(err);
    expect((await send()).outcome).toMatchObject({ kind: 'retry', errorKind });
  });

  it('reports an already-aborted caller signal as aborted without sending', async () => {
    const ctl = new AbortController();
    ctl.abort(new Error('shutting down'));
    const res = await send(agent, { signal: ctl.signal });
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'aborted' });
    expect(res.outcome.kind !== 'delivered' && res.outcome.message).toContain('shutting down');
  });

  it('turns an invalid URL into an outcome instead of throwing', async () => {
    const res = await send(agent, { url: 'not a url' });
    expect(res.outcome).toMatchObject({ kind: 'permanent', errorKind: 'invalid_request' });
  });
});

describe('sendWebhook over a real socket', () => {
  it('classifies connection refused on 127.0.0.1:1 as connect', async () => {
    const real = createDeliveryAgent();
    try {
      const res = await send(real, { url: 'http://127.0.0.1:1/hook' });
      expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'connect' });
      expect(res.outcome.kind !== 'delivered' && res.outcome.message).toContain('ECONNREFUSED');
    } finally {
      await real.close();
    }
  });

  it('turns an invalid extra header into a permanent invalid_request instead of throwing', async () => {
    // MockAgent skips undici's header validation, so this needs the real agent.
    const real = createDeliveryAgent();
    try {
      const res = await sendWebhook({
        agent: real,
        url: 'http://127.0.0.1:1/hook',
        headers: { 'x-bad': 'a\r\nb' },
        body: '{}',
        timeoutMs: 1_000,
      });
      expect(res.outcome).toMatchObject({ kind: 'permanent', errorKind: 'invalid_request' });
    } finally {
      await real.close();
    }
  });

  it('classifies connection refused through a MockAgent allowing net connect as connect', async () => {
    agent.enableNetConnect('127.0.0.1:1');
    expect((await send(agent, { url: 'http://127.0.0.1:1/hook' })).outcome).toMatchObject({ kind: 'retry', errorKind: 'connect' });
  });
});
