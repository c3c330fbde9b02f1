import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcwError, createClient, type NotifyClient, type NotifyResult } from '../../src/client.js';
import { createTestClient } from '../../src/testing.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { makeUser, startApi, type Api } from '../helpers/api.js';

// The HTTP client against a real service, and the in-memory test client beside it: the same calls
// must get the same answers (ids aside), replays and refusals included.

let db: TestDatabase;
let api: Api;
let token: string;

beforeAll(async () => {
  db = await createTestDatabase();
  // No endpoint: every event is answered skipped, like a test client with jobsPerEvent 0.
  api = await startApi(db);
  token = await makeUser(db.pool, 'billing', 'service');
});
afterAll(async () => {
  await api.close();
  await db.drop();
});

/** A refused call as both clients must agree on it. */
async function refusal(p: Promise<unknown>): Promise<unknown> {
  const err = await p.then(
    () => new Error('expected a refusal'),
    (e: unknown) => e,
  );
  return err instanceof AcwError ? { status: err.status, code: err.code, details: err.details } : String(err);
}

/** One run of the same calls, each answer reduced to what both clients must agree on (event ids as first-seen ordinals). */
async function script(client: NotifyClient): Promise<unknown[]> {
  const ids = new Map<string, number>();
  const shape = (r: NotifyResult) => {
    if (!ids.has(r.event_id)) ids.set(r.event_id, ids.size);
    return { event: ids.get(r.event_id), job_ids: r.job_ids.length, skipped: r.skipped, replayed: r.replayed };
  };
  const out: unknown[] = [];
  out.push(shape(await client.notify('a.b', { n: 1 }, { idempotencyKey: 'k1' })));
  out.push(shape(await client.notify('a.b', { n: 1 }, { idempotencyKey: 'k1' })));
  out.push(shape(await client.notify('a.b', { n: 1 })));
  out.push(
    (
      await client.notifyBatch([
        { topic: 'a.b', data: { n: 1 }, idempotencyKey: 'k1' },
        { topic: 'a.c', data: 2, idempotencyKey: 'k2' },
        { topic: 'a.d', data: 3, idempotencyKey: 'k3' },
        { topic: 'a.d', data: 3, idempotencyKey: 'k3' },
        { topic: 'a.e', data: null },
      ])
    ).map(shape),
  );
  out.push(
    (
      await client.notifyBatch([
        { topic: 'a.c', data: 2, idempotencyKey: 'k2' },
        { topic: 'a.b', data: { n: 1 }, idempotencyKey: 'k1' },
      ])
    ).map(shape),
  );
  out.push(await refusal(client.notify('a.b', { n: 2 }, { idempotencyKey: 'k1' })));
  out.push(
    await refusal(
      client.notifyBatch([
        { topic: 'a.f', data: 1, idempotencyKey: 'k4' },
        { topic: 'a.f', data: 2, idempotencyKey: 'k4' },
      ]),
    ),
  );
  // The refused batch took nothing: k4 is still free.
  out.push(shape(await client.notify('a.f', 9, { idempotencyKey: 'k4' })));
  return out;
}

describe('createClient against a real service, and createTestClient', () => {
  it('get the same answers to the same calls: replayed per event, within a batch too, and the same refusals', async () => {
    const real = await script(createClient({ url: api.url, token, retries: 0 }));
    expect(real).toEqual([
      { event: 0, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
      { event: 0, job_ids: 0, skipped: 'no_matching_endpoint', replayed: true },
      { event: 1, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
      [
        { event: 0, job_ids: 0, skipped: 'no_matching_endpoint', replayed: true },
        { event: 2, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
        { event: 3, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
        { event: 3, job_ids: 0, skipped: 'no_matching_endpoint', replayed: true },
        { event: 4, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
      ],
      [
        { event: 2, job_ids: 0, skipped: 'no_matching_endpoint', replayed: true },
        { event: 0, job_ids: 0, skipped: 'no_matching_endpoint', replayed: true },
      ],
      { status: 409, code: 'idempotency_conflict', details: { field: 'idempotency_key' } },
      { status: 409, code: 'idempotency_conflict', details: { field: 'events[1].idempotency_key', fields: ['events[1].idempotency_key'] } },
      { event: 5, job_ids: 0, skipped: 'no_matching_endpoint', replayed: false },
    ]);
    expect(await script(createTestClient({ jobsPerEvent: 0 }))).toEqual(real);
  });
});
