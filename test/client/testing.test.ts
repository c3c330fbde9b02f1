import { describe, expect, expectTypeOf, it } from 'vitest';
import { createClient, type AcwClient, type NotifyClient } from '../../src/client.js';
import { AcwError, createTestClient, type TestClient } from '../../src/testing.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// A service's own code, typed against the interface both clients implement.
async function closeWorkspace(notifier: NotifyClient, id: number): Promise<string> {
  const res = await notifier.notify('workspace.closed', { workspace_id: id }, { idempotencyKey: `workspace-${id}-closed` });
  return res.event_id;
}

async function failure(p: Promise<unknown>): Promise<AcwError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AcwError);
  return err as AcwError;
}

describe('createTestClient', () => {
  it('is a NotifyClient, as the HTTP client is', async () => {
    const test: NotifyClient = createTestClient();
    const http: NotifyClient = createClient({ url: 'http://acw.test', token: 't0ken' });
    expectTypeOf(createTestClient()).toExtend<NotifyClient>();
    expectTypeOf<AcwClient>().toExtend<NotifyClient>();
    expectTypeOf(test.notify).parameters.toEqualTypeOf<Parameters<typeof http.notify>>();
    expect(await closeWorkspace(test, 7)).toMatch(UUID_V4);
  });

  it('records each call with its topic, data, recipients and key', async () => {
    const c = createTestClient();
    await c.notify('workspace.sync_failed', { workspace_id: 42 }, { recipients: ['alice'] });
    await c.notify('invoice.paid', { id: 9 }, { idempotencyKey: 'inv-9' });
    await c.notify('workspace.sync_failed', { workspace_id: 43 });
    expect(c.calls).toEqual([
      { topic: 'workspace.sync_failed', data: { workspace_id: 42 }, recipients: ['alice'] },
      { topic: 'invoice.paid', data: { id: 9 }, idempotencyKey: 'inv-9' },
      { topic: 'workspace.sync_failed', data: { workspace_id: 43 } },
    ]);
    expect(c.lastCall()).toEqual({ topic: 'workspace.sync_failed', data: { workspace_id: 43 } });
    expect(c.callsFor('workspace.sync_failed').map((x) => x.data)).toEqual([{ workspace_id: 42 }, { workspace_id: 43 }]);
    expect(c.callsFor('nothing.here')).toEqual([]);
  });

  it('keeps data as the server would receive it, unaffected by later mutation', async () => {
    const c = createTestClient();
    const data = { at: new Date('2025-01-02T03:04:05.000Z'), gone: undefined, list: [1] };
    await c.notify('a.b', data);
    data.list.push(2);
    expect(c.lastCall()?.data).toEqual({ at: '2025-01-02T03:04:05.000Z', list: [1] });
  });

  it('answers with well-formed, predictable ids, and clear() starts over', async () => {
    const c = createTestClient();
    const first = await c.notify('a.b', 1);
    expect(first).toEqual({
      event_id: '00000000-0000-4000-8000-000000000001',
      job_ids: ['00000000-0000-4000-8000-000000000002'],
      replayed: false,
    });
    const second = await c.notify('a.b', 2);
    for (const id of [second.event_id, ...second.job_ids]) expect(id).toMatch(UUID_V4);
    expect(second.event_id).not.toBe(first.event_id);
    c.clear();
    expect(c.calls).toEqual([]);
    expect(c.lastCall()).toBeUndefined();
    expect((await c.notify('a.b', 1)).event_id).toBe(first.event_id);
  });

  it('answers skipped with no jobs when jobsPerEvent is 0', async () => {
    const c = createTestClient({ jobsPerEvent: 0 });
    expect(await c.notify('a.b', 1)).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint', replayed: false });
  });

  it('replays the first answer for the same idempotency key, and refuses the key with a different body', async () => {
    const c = createTestClient();
    const first = await c.notify('order.paid', { id: 1 }, { idempotencyKey: 'order-1' });
    const again = await c.notify('order.paid', { id: 1 }, { idempotencyKey: 'order-1' });
    expect(again).toEqual({ ...first, replayed: true });
    const err = await failure(c.notify('order.paid', { id: 2 }, { idempotencyKey: 'order-1' }));
    expect(err).toMatchObject({ status: 409, code: 'idempotency_conflict' });
    // Calls are recorded whatever came of them.
    expect(c.callsFor('order.paid')).toHaveLength(3);
  });

  it.each([
    ['Workspace.Failed', 'topic'],
    ['a..b', 'topic'],
    ['a.b.', 'topic'],
    ['', 'topic'],
    ['has space', 'topic'],
  ])('refuses the topic %j with a 400 naming the field', async (topic, field) => {
    const err = await failure(createTestClient().notify(topic, {}));
    expect(err).toMatchObject({ name: 'AcwError', status: 400, code: 'invalid_input', details: { field } });
    expect(err.message).toMatch(/^topic: /);
  });

  it('refuses data JSON cannot carry or the server would refuse', async () => {
    const c = createTestClient();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const data of [
      cyclic,
      { n: 1n },
      undefined,
      () => 1,
      { toJSON: () => undefined },
      { s: 'nul \u0000 byte' },
      { s: 'lone \ud800' },
      { ['\udc00']: 1 },
    ]) {
      const err = await failure(c.notify('a.b', data));
      expect(err).toMatchObject({ status: 400, code: 'invalid_input', details: { field: 'data' } });
    }
    // Over 256 KiB the server answers 413, and so does the test client.
    const big = await failure(c.notify('a.b', 'x'.repeat(300 * 1024)));
    expect(big).toMatchObject({ status: 413, code: 'payload_too_large', details: { field: 'data' } });
    const inBatch = await failure(
      c.notifyBatch([
        { topic: 'a.b', data: 1 },
        { topic: 'a.b', data: 'x'.repeat(300 * 1024) },
      ]),
    );
    expect(inBatch).toMatchObject({ status: 413, code: 'payload_too_large', details: { field: 'events[1].data' } });
    // Text that merely looks like an escape is fine: a backslash followed by "u0000" or "ud800", and a real surrogate pair.
    for (const data of ['\\u0000', '\\ud800', { s: '\\\\ud800 😀' }])
      expect(await c.notify('a.b', data)).toMatchObject({ replayed: false });
    expect(await c.notify('a.b', null)).toMatchObject({ replayed: false });
  });

  it('refuses a malformed idempotency key or recipient, and unknown users when told who exists', async () => {
    const c = createTestClient({ users: ['alice'] });
    expect((await failure(c.notify('a.b', 1, { idempotencyKey: 'has space' }))).details).toMatchObject({ field: 'idempotency_key' });
    expect((await failure(c.notify('a.b', 1, { recipients: ['no/slash'] }))).details).toMatchObject({ field: 'recipients.0' });
    const err = await failure(c.notify('a.b', 1, { recipients: ['alice', 'mallory'] }));
    expect(err).toMatchObject({ status: 400, code: 'unknown_recipients', details: { names: ['mallory'] } });
    expect(await c.notify('a.b', 1, { recipients: ['alice'] })).toMatchObject({ replayed: false });
  });

  it('fails the next call on request, then works again', async () => {
    const c = createTestClient();
    c.failNext();
    expect(await failure(c.notify('a.b', 1))).toMatchObject({ status: 503 });
    c.failNext(new Error('custom'));
    await expect(c.notifyBatch([{ topic: 'a.b', data: 1 }])).rejects.toThrow('custom');
    expect(await c.notify('a.b', 1)).toMatchObject({ replayed: false });
  });

  it('honours an aborted signal', async () => {
    await expect(createTestClient().notify('a.b', 1, { signal: AbortSignal.abort(new Error('stop')) })).rejects.toThrow('stop');
  });
});

describe('createTestClient().notifyBatch', () => {
  it('records every event and answers each in order', async () => {
    const c: TestClient = createTestClient();
    const res = await c.notifyBatch([
      { topic: 'a.b', data: 1 },
      { topic: 'a.c', data: 2, recipients: ['bob'], idempotencyKey: 'k2' },
    ]);
    expect(res.map((r) => r.replayed)).toEqual([false, false]);
    expect(c.calls).toEqual([
      { topic: 'a.b', data: 1 },
      { topic: 'a.c', data: 2, recipients: ['bob'], idempotencyKey: 'k2' },
    ]);
    expect(await c.notify('a.c', 2, { recipients: ['bob'], idempotencyKey: 'k2' })).toEqual({ ...res[1], replayed: true });
  });

  it('is all or nothing: one bad event keeps every key of the batch unused', async () => {
    const c = createTestClient();
    const err = await failure(
      c.notifyBatch([
        { topic: 'a.b', data: 1, idempotencyKey: 'k1' },
        { topic: 'BAD', data: 2 },
      ]),
    );
    expect(err.details).toMatchObject({ field: 'events[1].topic' });
    expect(err.message).toMatch(/^events\[1\]\.topic: /);
    // k1 was not taken: the same key with a different body is a fresh event, not a conflict.
    expect(await c.notify('a.b', 'other', { idempotencyKey: 'k1' })).toMatchObject({
      event_id: '00000000-0000-4000-8000-000000000001',
      replayed: false,
    });
  });

  it('replays within a batch, as the server does for a repeated key', async () => {
    const c = createTestClient();
    const [a, b] = await c.notifyBatch([
      { topic: 'a.b', data: 1, idempotencyKey: 'same' },
      { topic: 'a.b', data: 1, idempotencyKey: 'same' },
    ]);
    expect(b).toEqual({ ...a, replayed: true });
  });

  it('refuses one key twice in a batch with different data (409 naming the later event) and keeps the key unused, as the server does', async () => {
    const c = createTestClient();
    const err = await failure(
      c.notifyBatch([
        { topic: 'a.b', data: 1, idempotencyKey: 'k' },
        { topic: 'a.b', data: 2, idempotencyKey: 'k' },
      ]),
    );
    expect(err).toMatchObject({ status: 409, code: 'idempotency_conflict', details: { field: 'events[1].idempotency_key' } });
    expect(await c.notify('a.b', 2, { idempotencyKey: 'k' })).toMatchObject({ replayed: false });
  });

  // Fails today: src/testing.ts hashes with JSON.stringify (key order matters), the service with
  // canonicalJson (src/notify/canonical-json.ts) since the idempotency fix. Flip to `it` once the
  // testing client uses it.
  it('replays the same data with its keys in another order, as the server does (the request hash is canonical)', async () => {
    const c = createTestClient();
    const first = await c.notify('a.b', { x: 1, y: { p: 1, q: 2 } }, { idempotencyKey: 'k-order' });
    expect(await c.notify('a.b', { y: { q: 2, p: 1 }, x: 1 }, { idempotencyKey: 'k-order' })).toEqual({ ...first, replayed: true });
  });

  it('takes a batch over 1000 events 1000 at a time, as the HTTP client sends it (test/client/batch-split.test.ts)', async () => {
    const c = createTestClient();
    const events = Array.from({ length: 1001 }, (_, i) => ({ topic: 'a.b', data: i }));
    expect(await c.notifyBatch(events)).toHaveLength(1001);
    const bad = [...events.slice(0, 1000), { topic: 'A', data: 1 }];
    expect(await failure(c.notifyBatch(bad))).toMatchObject({
      status: 400,
      details: { field: 'events[1000].topic' },
      batch: { failed: { start: 1000, end: 1001 }, notSent: { start: 1001, end: 1001 } },
    });
  });
});
