// Consistent edges of the API: the Idempotency-Key header of POST /v1/notify (bare or quoted, with or
// without the body field), query parameters refused on every route that takes none (POST and DELETE
// as much as GET), and an answer stored by an older version replayed through today's schema.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ROUTES } from '../../src/http/contract/routes.js';
import { canonicalJson } from '../../src/notify/canonical-json.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { allowDropped } from '../helpers/contract.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let api: Api;
let token: string;
let admin: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
  token = await makeUser(db.pool, 'billing', 'service');
  admin = await makeUser(db.pool, 'root', 'admin');
});

const notify = (body: unknown, key?: string) =>
  call(api.url, 'POST', '/v1/notify', { token, body, ...(key !== undefined ? { headers: { 'idempotency-key': key } } : {}) });
const events = async () => (await db.pool.query<{ idempotency_key: string | null }>('select idempotency_key from events')).rows;

describe('POST /v1/notify Idempotency-Key', () => {
  const ev = { topic: 'a.b', data: { n: 1 } };

  it('the header alone keys the event: the same header again is the first answer, replayed', async () => {
    const first = await notify(ev, 'hdr-1');
    expect(first.status).toBe(202);
    const again = await notify(ev, 'hdr-1');
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...first.body, replayed: true });
    expect(await events()).toEqual([{ idempotency_key: 'hdr-1' }]);
  });

  it('the body field alone keys it, as before; the header then names the same key', async () => {
    const first = await notify({ ...ev, idempotency_key: 'body-1' });
    expect(first.status).toBe(202);
    const viaHeader = await notify(ev, 'body-1');
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.body.event_id).toBe(first.body.event_id);
  });

  it('both, equal: one key', async () => {
    expect((await notify({ ...ev, idempotency_key: 'both-1' }, 'both-1')).status).toBe(202);
    expect((await notify({ ...ev, idempotency_key: 'both-1' }, 'both-1')).status).toBe(200);
    expect(await events()).toEqual([{ idempotency_key: 'both-1' }]);
  });

  it('both, different: a 400 naming idempotency_key, and nothing written', async () => {
    const before = await rowCounts(db.pool);
    const res = await notify({ ...ev, idempotency_key: 'body-2' }, 'header-2');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_input', details: { field: 'idempotency_key', header: 'idempotency-key' } });
    expect(res.body.error.message).toMatch(/^idempotency_key: differs from the Idempotency-Key header/);
    expect(await rowCounts(db.pool)).toEqual(before);
  });

  it('quoted, as the IETF draft sends it, is the same key as bare (escapes included)', async () => {
    expect((await notify(ev, '"q-1"')).status).toBe(202);
    expect((await notify(ev, 'q-1')).status).toBe(200);
    expect((await notify({ ...ev, idempotency_key: 'q-1' }, '"q-1"')).status).toBe(200);
    expect((await notify(ev, '"q\\"2"')).status).toBe(202);
    expect((await events()).map((e) => e.idempotency_key).toSorted()).toEqual(['q"2', 'q-1']);
  });

  it('reused with another body stays a 409', async () => {
    expect((await notify(ev, 'k-409')).status).toBe(202);
    const res = await notify({ ...ev, data: { n: 2 } }, 'k-409');
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_conflict');
  });

  it.each([
    ['a space', 'two words'],
    ['an unterminated quote', '"open'],
    ['an empty quoted string', '""'],
    ['more than 200 characters', 'k'.repeat(201)],
    ['two headers (joined by a comma and a space)', 'a, b'],
  ])('a malformed header (%s) is a 400 naming idempotency-key; nothing written', async (_what, value) => {
    const res = await notify(ev, value);
    expect(res.status).toBe(400);
    expect(res.body.error.details.field).toBe('idempotency-key');
    expect(await events()).toEqual([]);
  });
});

/** A route's path with its parameters filled in. */
const fill = (url: string): string =>
  url
    .replace(':id', url.startsWith('/v1/notifications') || url.startsWith('/v1/alerts') ? '1' : '00000000-0000-4000-8000-000000000001')
    .replace(':name', 'default');

describe('query parameters', () => {
  it('are refused on every /v1 route that takes none, POST, PATCH and DELETE as much as GET, naming the parameter', async () => {
    const got: string[] = [];
    for (const r of ROUTES.filter((x) => x.url.startsWith('/v1/') && !x.query)) {
      const res = await call(api.url, r.method, `${fill(r.url)}?bogus=1`, { token: admin });
      got.push(`${r.method} ${r.url} ${res.status} ${String(res.body?.error?.details?.field)}`);
    }
    expect(got).toEqual(ROUTES.filter((x) => x.url.startsWith('/v1/') && !x.query).map((r) => `${r.method} ${r.url} 400 bogus`));
  });

  it('an unknown one beside known ones is refused too', async () => {
    const res = await call(api.url, 'DELETE', '/v1/endpoints/default?force=true&forse=true', { token: admin });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'unknown_field', details: { field: 'forse' } });
  });
});

describe('an answer stored by an older version', () => {
  it('is replayed through the schema: what the schema lists, nothing it does not', async () => {
    const ev = { topic: 'a.b', data: { legacy: true } };
    const hash = createHash('sha256')
      .update(canonicalJson([ev.topic, ev.data, []]))
      .digest('hex');
    const stored = { event_id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', job_ids: [], unknown_recipients: ['gone'], internal: { x: 1 } };
    await db.pool.query(
      `insert into event_keys (principal, idempotency_key, day, event_id, request_hash, response)
       values ('billing', 'old-1', current_date, $1, $2, $3)`,
      [stored.event_id, hash, JSON.stringify(stored)],
    );
    // The handler passes the stored members on; the serializer drops those the schema does not list.
    allowDropped('unknown_recipients', 'internal');
    const res = await notify({ ...ev, idempotency_key: 'old-1' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ event_id: stored.event_id, job_ids: [], replayed: true });
  });
});
