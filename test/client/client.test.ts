import { inspect } from 'node:util';
import nock from 'nock';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AcwError, createClient, type ClientOptions, type NotifyClient } from '../../src/client.js';
import { waitFor } from '../helpers/logs.js';

const ORIGIN = 'http://acw.test';
const TOKEN = 'acw_svc_5f0c9b7e1d2a4c6b8e0f1a3c5d7e9b21';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Seen {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

let seen: Seen[] = [];

/** Answer the next POST to `path` and record what was sent. */
function answer(status: number, body?: unknown, headers: Record<string, string> = {}, path = '/v1/notify', delayMs = 0): void {
  const interceptor = nock(ORIGIN).post(path);
  if (delayMs > 0) interceptor.delay(delayMs);
  interceptor.reply(function (uri, reqBody) {
    const parsed = (typeof reqBody === 'string' ? JSON.parse(reqBody) : reqBody) as Record<string, unknown>;
    seen.push({ path: uri, headers: this.req.headers, body: parsed });
    return [status, typeof body === 'string' ? body : JSON.stringify(body), headers];
  });
}

function client(extra: Partial<ClientOptions> = {}): NotifyClient {
  return createClient({ url: ORIGIN, token: TOKEN, backoff: { baseMs: 1, capMs: 5 }, ...extra });
}

async function failure(p: Promise<unknown>): Promise<AcwError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AcwError);
  return err as AcwError;
}

const ACCEPTED = { event_id: '7d3c8e52-4f1b-4a8e-9c2d-0b1e2f3a4b5c', job_ids: ['1a2b3c4d-0000-4000-8000-000000000001'] };

beforeAll(() => nock.disableNetConnect());
afterAll(() => {
  nock.cleanAll();
  nock.enableNetConnect();
});
beforeEach(() => {
  seen = [];
});
afterEach(() => {
  const pending = nock.pendingMocks();
  nock.cleanAll();
  if (pending.length > 0) throw new Error(`interceptors not used: ${pending.join(', ')}`);
});

describe('createClient().notify', () => {
  it('POSTs the event with the bearer token, JSON content type and a generated idempotency key', async () => {
    answer(202, ACCEPTED);
    const res = await client().notify('workspace.sync_failed', { workspace_id: 42 }, { recipients: ['alice'] });
    expect(res).toEqual({ ...ACCEPTED, replayed: false });
    expect(seen).toHaveLength(1);
    const [req] = seen;
    expect(req?.path).toBe('/v1/notify');
    expect(req?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(req?.headers['content-type']).toBe('application/json');
    expect(req?.body).toEqual({
      topic: 'workspace.sync_failed',
      data: { workspace_id: 42 },
      recipients: ['alice'],
      idempotency_key: expect.stringMatching(UUID),
    });
  });

  it('sends the caller’s idempotency key as is and leaves recipients out when not given', async () => {
    answer(202, ACCEPTED);
    await client().notify('a.b', null, { idempotencyKey: 'order-77-paid' });
    expect(seen[0]?.body).toEqual({ topic: 'a.b', data: null, idempotency_key: 'order-77-paid' });
  });

  it('makes a new key for each call', async () => {
    answer(202, ACCEPTED);
    answer(202, ACCEPTED);
    const c = client();
    await c.notify('a.b', 1);
    await c.notify('a.b', 1);
    expect(seen[0]?.body.idempotency_key).not.toBe(seen[1]?.body.idempotency_key);
  });

  it('keeps a path prefix in the base URL', async () => {
    nock(ORIGIN).post('/acw/v1/notify').reply(202, ACCEPTED);
    expect((await client({ url: `${ORIGIN}/acw/` }).notify('a.b', 1)).event_id).toBe(ACCEPTED.event_id);
  });

  it('passes `skipped` through when no job was written', async () => {
    answer(202, { event_id: ACCEPTED.event_id, job_ids: [], skipped: 'no_matching_endpoint' });
    expect(await client().notify('a.b', 1)).toEqual({
      event_id: ACCEPTED.event_id,
      job_ids: [],
      skipped: 'no_matching_endpoint',
      replayed: false,
    });
  });

  it('reports the replayed flag the server sends', async () => {
    answer(200, { ...ACCEPTED, replayed: true });
    expect(await client().notify('a.b', 1, { idempotencyKey: 'k1' })).toEqual({ ...ACCEPTED, replayed: true });
  });

  it('from a server that predates the replayed field, takes a 200 as replayed', async () => {
    answer(200, ACCEPTED);
    expect(await client().notify('a.b', 1, { idempotencyKey: 'k1' })).toEqual({ ...ACCEPTED, replayed: true });
  });

  it('retries 500 and 503 with the same idempotency key and returns the eventual answer', async () => {
    answer(500, { error: { code: 'internal', message: 'boom' } });
    answer(503, 'Service Unavailable');
    answer(202, ACCEPTED);
    const res = await client().notify('a.b', { n: 1 });
    expect(res).toEqual({ ...ACCEPTED, replayed: false });
    expect(seen).toHaveLength(3);
    const keys = new Set(seen.map((s) => s.body.idempotency_key));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(UUID);
    // Every attempt is the very same request.
    expect(seen.map((s) => s.body)).toEqual([seen[0]?.body, seen[0]?.body, seen[0]?.body]);
  });

  it('retries a network error', async () => {
    nock(ORIGIN).post('/v1/notify').replyWithError({ code: 'ECONNRESET', message: 'socket hang up' });
    answer(202, ACCEPTED);
    expect(await client().notify('a.b', 1)).toEqual({ ...ACCEPTED, replayed: false });
  });

  it('gives up after `retries` further attempts with the last failure', async () => {
    for (let i = 0; i < 3; i++) nock(ORIGIN).post('/v1/notify').replyWithError({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' });
    const err = await failure(client({ retries: 2 }).notify('a.b', 1));
    expect(err).toMatchObject({ status: 0, code: 'network_error', attempts: 3 });
    expect(err.message).toContain('ECONNREFUSED');
  });

  it('retries an attempt that times out, with the same key', async () => {
    // The late first answer and the retry's answer differ: getting the second proves the first was cut off.
    // A timeout far from both answers' times, so load cannot make the prompt one time out too.
    answer(202, { ...ACCEPTED, event_id: '00000000-0000-4000-8000-00000000000f' }, {}, '/v1/notify', 10_000);
    answer(202, ACCEPTED);
    const res = await client({ timeoutMs: 1_000 }).notify('a.b', 1);
    expect(res.event_id).toBe(ACCEPTED.event_id);
    // The first attempt may or may not have been recorded before it was cut off; any that were carry one key.
    expect(new Set(seen.map((s) => s.body.idempotency_key)).size).toBe(1);
  });

  it('reports a timeout once the attempts run out', async () => {
    answer(202, ACCEPTED, {}, '/v1/notify', 500);
    answer(202, ACCEPTED, {}, '/v1/notify', 500);
    const err = await failure(client({ timeoutMs: 30, retries: 1 }).notify('a.b', 1));
    expect(err).toMatchObject({ status: 0, code: 'timeout', attempts: 2 });
  });

  it('honours Retry-After (seconds) on a 429', async () => {
    answer(429, { error: { code: 'rate_limited', message: 'slow down' } }, { 'retry-after': '1' });
    answer(202, ACCEPTED);
    const started = Date.now();
    await client().notify('a.b', 1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(seen).toHaveLength(2);
    expect(seen[0]?.body.idempotency_key).toBe(seen[1]?.body.idempotency_key);
  });

  it('does not wait for a Retry-After beyond maxRetryAfterMs: fails at once, saying how long', async () => {
    answer(429, { error: { code: 'rate_limited', message: 'slow down' } }, { 'retry-after': '3600' });
    const err = await failure(client().notify('a.b', 1));
    expect(err).toMatchObject({ status: 429, code: 'rate_limited', retryAfterMs: 3_600_000, attempts: 1 });
  });

  it.each([408, 425, 502, 504])('retries a %i', async (status) => {
    answer(status, '');
    answer(202, ACCEPTED);
    await client().notify('a.b', 1);
    expect(seen).toHaveLength(2);
  });

  it('turns a 400 into an AcwError with the server’s code, message and details, and does not retry', async () => {
    answer(400, {
      error: { code: 'invalid_input', message: 'topic: expected lowercase dot-separated words', details: { field: 'topic' } },
    });
    const err = await failure(client().notify('Bad Topic', 1));
    expect(err).toMatchObject({ name: 'AcwError', status: 400, code: 'invalid_input', details: { field: 'topic' }, attempts: 1 });
    expect(err.message).toContain('topic: expected lowercase dot-separated words');
    expect(seen).toHaveLength(1);
  });

  it.each([401, 403, 404, 409, 413, 422])('does not retry a %i', async (status) => {
    answer(status, { error: { code: `c${status}`, message: 'no' } });
    const err = await failure(client().notify('a.b', 1));
    expect(err).toMatchObject({ status, code: `c${status}`, attempts: 1 });
    expect(seen).toHaveLength(1);
  });

  it('falls back to the status line and a snippet of the body for a non-JSON error', async () => {
    answer(413, '<html><body>413 Request Entity Too Large</body></html>');
    const err = await failure(client().notify('a.b', 1));
    expect(err).toMatchObject({ status: 413, code: 'http_413', details: undefined });
    expect(err.message).toContain('Request Entity Too Large');
  });

  it('never puts the token in an error, even when the server echoes it', async () => {
    answer(401, {
      error: { code: 'unauthorized', message: `unknown token ${TOKEN}`, details: { token: TOKEN, nested: [`Bearer ${TOKEN}`] } },
    });
    const err = await failure(client().notify('a.b', 1));
    expect(err.status).toBe(401);
    expect(seen).toHaveLength(1);
    expect(err.message).not.toContain(TOKEN);
    expect(JSON.stringify(err.details)).not.toContain(TOKEN);
    expect(inspect(err, { depth: 10 })).not.toContain(TOKEN);
    expect(err.message).toContain('[redacted]');

    answer(500, `<pre>Authorization: Bearer ${TOKEN}</pre>`);
    const err5 = await failure(client({ retries: 0 }).notify('a.b', 1));
    expect(inspect(err5, { depth: 10 })).not.toContain(TOKEN);

    nock(ORIGIN).post('/v1/notify').replyWithError(`connection to ${TOKEN} refused`);
    const errNet = await failure(client({ retries: 0 }).notify('a.b', 1));
    expect(errNet.code).toBe('network_error');
    expect(inspect(errNet, { depth: 10 })).not.toContain(TOKEN);
  });

  it('refuses a token that cannot be a header value without echoing it', () => {
    expect(() => createClient({ url: ORIGIN, token: 'abc\r\nx-evil: 1' })).toThrow(/token must be/);
    expect(() => createClient({ url: ORIGIN, token: '' })).toThrow(/token must be/);
    let thrown: unknown;
    try {
      createClient({ url: ORIGIN, token: 'secret value' });
    } catch (e) {
      thrown = e;
    }
    expect(String(thrown)).toMatch(/token must be/);
    expect(String(thrown)).not.toContain('secret value');
  });

  it('refuses data JSON cannot carry without sending anything', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const err = await failure(client().notify('a.b', cyclic));
    expect(err).toMatchObject({ status: 400, code: 'invalid_input', attempts: 0, details: { field: 'data' } });
    await failure(client().notify('a.b', { n: 1n }));
    await failure(client().notify('a.b', undefined));
  });

  it('rejects a 2xx that is not a notify answer, without retrying', async () => {
    answer(200, '<html>a login page</html>');
    const err = await failure(client().notify('a.b', 1));
    expect(err).toMatchObject({ status: 200, code: 'bad_response' });
    answer(202, { ok: true });
    expect((await failure(client().notify('a.b', 1))).code).toBe('bad_response');
  });

  it('stops at once when the caller aborts, even while backing off', async () => {
    answer(503, '');
    const ctl = new AbortController();
    const p = client({ backoff: { baseMs: 10_000, capMs: 10_000 } }).notify('a.b', 1, { signal: ctl.signal });
    // Aborted once the first attempt was answered: during the 10 s back-off.
    void waitFor(() => seen.length === 1).then(() => ctl.abort(new Error('shutting down')));
    await expect(p).rejects.toThrow('shutting down');
    expect(seen).toHaveLength(1);
  });

  it('stops at once when the caller aborts during an attempt', async () => {
    answer(202, ACCEPTED, {}, '/v1/notify', 2000);
    const p = client().notify('a.b', 1, { signal: AbortSignal.timeout(50) });
    await expect(p).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  it('uses an injected fetch', async () => {
    const requests: Array<{ url: string; init: RequestInit | undefined }> = [];
    const fake: typeof fetch = async (input, init) => {
      requests.push({ url: String(input), init });
      return new Response(JSON.stringify(ACCEPTED), { status: 202, headers: { 'content-type': 'application/json' } });
    };
    await client({ fetch: fake }).notify('a.b', 1);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.url).toBe(`${ORIGIN}/v1/notify`);
  });
});

/** A service's answer to a new batch of n events. */
const ok = (n: number) => ({ results: Array.from({ length: n }, (_, i) => ({ event_id: `e${i}`, job_ids: [], replayed: false })) });

describe('createClient().notifyBatch', () => {
  const events = [
    { topic: 'invoice.paid', data: { id: 1 } },
    { topic: 'invoice.paid', data: { id: 2 }, recipients: ['bob'], idempotencyKey: 'invoice-2-paid' },
  ];
  // The service's answer to a new batch: a replayed flag on every result.
  const results = [
    { event_id: '00000000-0000-4000-8000-0000000000e1', job_ids: ['00000000-0000-4000-8000-0000000000a1'], replayed: false },
    { event_id: '00000000-0000-4000-8000-0000000000e2', job_ids: [], skipped: 'webhooks_disabled', replayed: false },
  ];

  it('POSTs {events} with a key per event and maps the results in order', async () => {
    answer(202, { results }, {}, '/v1/notify/batch');
    const res = await client().notifyBatch(events);
    expect(res).toEqual([
      { ...results[0], replayed: false },
      { ...results[1], replayed: false },
    ]);
    const body = seen[0]?.body as { events: Array<Record<string, unknown>> };
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(body.events).toEqual([
      { topic: 'invoice.paid', data: { id: 1 }, idempotency_key: expect.stringMatching(UUID) },
      { topic: 'invoice.paid', data: { id: 2 }, recipients: ['bob'], idempotency_key: 'invoice-2-paid' },
    ]);
  });

  it('retries a batch with the same per-event keys, so the retry replays', async () => {
    answer(503, '', {}, '/v1/notify/batch');
    answer(200, { results: results.map((r) => ({ ...r, replayed: true })) }, {}, '/v1/notify/batch');
    const res = await client().notifyBatch(events);
    expect(res.map((r) => r.replayed)).toEqual([true, true]);
    expect(seen).toHaveLength(2);
    expect(seen[1]?.body).toEqual(seen[0]?.body);
    const sent = seen[0]?.body as { events: Array<{ idempotency_key: string }> } | undefined;
    const keys = sent?.events.map((e) => e.idempotency_key);
    expect(new Set(keys).size).toBe(2);
  });

  it("takes each result's replayed flag from the server (a batch mixing a used key and a new one is a 202)", async () => {
    answer(202, { results: [{ ...results[0], replayed: true }, results[1]] }, {}, '/v1/notify/batch');
    expect((await client().notifyBatch(events)).map((r) => r.replayed)).toEqual([true, false]);
  });

  it('names the event whose data cannot be sent', async () => {
    const err = await failure(client().notifyBatch([events[0]!, { topic: 'a.b', data: 10n }]));
    expect(err.details).toEqual({ field: 'events[1].data' });
  });

  it('sends nothing for an empty batch', async () => {
    expect(await client().notifyBatch([])).toEqual([]);
  });

  // The real service cannot be made to answer 503 to one request of a call: the split is tested
  // against it in batch-split.test.ts, the retried middle request here.
  it('retries a failed request of a split batch with the same keys, then reports what was committed', async () => {
    const many = Array.from({ length: 2001 }, (_, i) => ({ topic: 'a.b', data: i }));
    answer(202, ok(1000), {}, '/v1/notify/batch');
    answer(503, { error: { code: 'unavailable', message: 'events[7].topic is fine, the database is not' } }, {}, '/v1/notify/batch');
    answer(503, { error: { code: 'unavailable', message: 'events[7].topic is fine, the database is not' } }, {}, '/v1/notify/batch');
    const err = await failure(client({ retries: 1 }).notifyBatch(many));
    const sent = seen.map((s) => (s.body as { events: Array<{ idempotency_key: string }> }).events);
    expect(sent.map((e) => e.length)).toEqual([1000, 1000, 1000]);
    expect(sent[2]).toEqual(sent[1]);
    expect(new Set([...sent[0]!, ...sent[1]!].map((e) => e.idempotency_key)).size).toBe(2000);
    expect(err).toMatchObject({
      status: 503,
      attempts: 2,
      batch: { failed: { start: 1000, end: 2000 }, notSent: { start: 2000, end: 2001 } },
    });
    expect(err.batch?.results).toEqual(ok(1000).results);
    // The server's events[i] counts from the start of its request; the error counts from the caller's list.
    expect(err.message).toContain('events[1007].topic');
  });

  it('rejects a result list of the wrong length', async () => {
    answer(202, { results: [results[0]] }, {}, '/v1/notify/batch');
    expect((await failure(client().notifyBatch(events))).code).toBe('bad_response');
  });
});
