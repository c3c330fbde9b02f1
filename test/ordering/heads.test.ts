import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';

// A dead head of an ordering key (docs/operations.md#ordered-delivery): relaxed endpoints let the
// next event go, strict ones block the key until an operator retries or skips the head; replay
// sends a window in order per key.

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let viewer: string;
let service: string;
/** Events whose data.tag is listed here are refused with a 400 (a permanent failure: dead at once). */
let refuse = new Set<string>();
/** The endpoint `flaky` answers 503 while this is set. */
let down = true;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver((r) => {
    if (r.url === '/flaky' && down) return { status: 503 };
    const body = JSON.parse(r.body.toString()) as { data: { tag?: string } };
    return refuse.has(body.data.tag ?? '') ? { status: 400, body: 'no' } : { status: 200 };
  });
  // order.* goes to both endpoints, relaxed.* and strict.* to one each.
  const ep = (name: string, ordering: string) => ({
    name,
    url: `${rx.url}/${name}`,
    secret: 's3cret',
    topics: ['order.*', `${name}.*`],
    ordering,
  });
  api = await startApi(
    db,
    {
      jobs: { max_attempts: 5, retry: { base: '10ms', max: '50ms', jitter: 0 } },
      notify: {
        webhook: {
          endpoints: [ep('relaxed', 'relaxed'), ep('strict', 'strict'), { ...ep('flaky', 'relaxed'), topics: ['flaky.*'] }],
          // Only `flaky` fails three times in a row.
          circuit: { failure_threshold: 3, min_attempts: 1000, cooldown: '50ms', cooldown_max: '100ms' },
          // Endpoints stored through the API go through the SSRF guard: let the test receiver in.
          allow_networks: ['127.0.0.0/8'],
        },
      },
    },
    'serve',
    { secretCodec: codecOf(new SecretBox(randomBytes(32)))! },
  );
  admin = await makeUser(db.pool, 'ops', 'admin');
  viewer = await makeUser(db.pool, 'watcher', 'viewer');
  service = await makeUser(db.pool, 'billing', 'service');
}, 30_000);
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});
beforeEach(() => {
  rx.requests.length = 0;
  refuse = new Set();
});

const circuitOf = async (endpoint: string): Promise<string | undefined> =>
  (await db.pool.query(`select circuit from endpoint_state where endpoint = $1`, [endpoint])).rows[0]?.circuit;

const tagsAt = (path: string, key: string): string[] =>
  rx.requests
    .filter((r) => r.url === path && r.headers['x-acw-ordering-key'] === key)
    .map((r) => (JSON.parse(r.body.toString()) as { data: { tag: string } }).data.tag);

async function notifyKeyed(key: string, tags: string[], topic = 'order.updated'): Promise<void> {
  const res = await call(api.url, 'POST', '/v1/notify/batch', {
    token: service,
    body: { events: tags.map((tag) => ({ topic, data: { tag }, ordering_key: key })) },
  });
  expect(res.status).toBe(202);
}

const live = async (key: string): Promise<number> =>
  (await db.pool.query(`select count(*)::int as n from job_queue where ordering_key = $1`, [key])).rows[0].n;

describe('a dead head', () => {
  it('relaxed: the next event of the key goes; strict: the key waits, listed and alerted', async () => {
    refuse = new Set(['r1', 's1']);
    await notifyKeyed('k-relaxed', ['r0', 'r1', 'r2', 'r3'], 'relaxed.updated');
    await waitFor(() => tagsAt('/relaxed', 'k-relaxed').length === 4);
    expect(tagsAt('/relaxed', 'k-relaxed')).toEqual(['r0', 'r1', 'r2', 'r3']);

    await notifyKeyed('k-strict', ['s0', 's1', 's2', 's3']);
    await waitFor(() => tagsAt('/strict', 'k-strict').length === 2);
    const blocked = await waitFor(async () => {
      const res = await call(api.url, 'GET', '/v1/ordering/blocked', { token: viewer });
      return res.body.items.length === 1 ? res.body.items[0] : null;
    });
    expect(blocked).toMatchObject({ endpoint: 'strict', ordering_key: 'k-strict', waiting: 2, waiting_capped: false });
    expect(blocked.last_error).toMatch(/400/);
    // Nothing else of the key goes while it is blocked; the relaxed endpoint's copy went on.
    await new Promise((r) => setTimeout(r, 300));
    expect(tagsAt('/strict', 'k-strict')).toEqual(['s0', 's1']);
    expect(tagsAt('/relaxed', 'k-strict')).toEqual(['s0', 's1', 's2', 's3']);
    expect(await live('k-strict')).toBe(2);
    const alerts = await call(api.url, 'GET', '/v1/alerts?action=webhook.key_blocked', { token: viewer });
    expect(alerts.body.items).toHaveLength(1);
    expect(alerts.body.items[0]).toMatchObject({ endpoint: 'strict', ordering_key: 'k-strict', job_id: blocked.head_job_id });

    // Retry the head: it goes again, first, then the rest in order.
    const body = { endpoint: 'strict', ordering_key: 'k-strict' };
    expect((await call(api.url, 'POST', '/v1/ordering/blocked/retry-head', { token: viewer, body })).status).toBe(403);
    refuse = new Set();
    const retried = await call(api.url, 'POST', '/v1/ordering/blocked/retry-head', { token: admin, body });
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual({ ...body, head_job_id: blocked.head_job_id, action: 'retried' });
    await waitFor(() => tagsAt('/strict', 'k-strict').length === 5);
    expect(tagsAt('/strict', 'k-strict')).toEqual(['s0', 's1', 's1', 's2', 's3']);
    // The retried head kept its sequence number.
    const seqs = rx.requests.filter((r) => r.url === '/strict').map((r) => r.headers['x-acw-sequence']);
    expect(seqs).toEqual(['1', '2', '2', '3', '4']);
    await waitFor(async () => (await live('k-strict')) === 0);
    expect((await call(api.url, 'GET', '/v1/ordering/blocked', { token: viewer })).body.items).toEqual([]);
    // Not blocked any more: a 409 naming the field; an unknown key: a 404.
    const again = await call(api.url, 'POST', '/v1/ordering/blocked/retry-head', { token: admin, body });
    expect(again.status).toBe(409);
    expect(again.body.error.details.field).toBe('ordering_key');
    const unknown = await call(api.url, 'POST', '/v1/ordering/blocked/skip-head', {
      token: admin,
      body: { ...body, ordering_key: 'nope' },
    });
    expect(unknown.status).toBe(404);
    const audit = await db.pool.query(`select action, actor, details from audit_log where action like 'ordering.%'`);
    expect(audit.rows).toEqual([{ action: 'ordering.retry_head', actor: 'ops', details: { ...body, job_id: blocked.head_job_id } }]);
  }, 30_000);

  it('an endpoint stored through the API takes the setting (strict blocks), checked and changed like its other fields', async () => {
    const bad = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'stored', url: `${rx.url}/stored`, topics: ['stored.*'], ordering: 'fifo' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('ordering');
    const made = await call(api.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'stored', url: `${rx.url}/stored`, topics: ['stored.*'], ordering: 'strict' },
    });
    expect(made.status).toBe(201);
    expect(made.body.ordering).toBe('strict');
    refuse = new Set(['u0']);
    // Live in this process once the registry has read it.
    await waitFor(async () => {
      const res = await call(api.url, 'POST', '/v1/notify', {
        token: service,
        body: { topic: 'stored.probe', data: { tag: 'p' }, ordering_key: `probe-${Date.now()}` },
      });
      return res.body.job_ids.length === 1;
    });
    await notifyKeyed('k-stored', ['u0', 'u1'], 'stored.updated');
    await waitFor(async () => {
      const res = await call(api.url, 'GET', '/v1/ordering/blocked?endpoint=stored', { token: viewer });
      return res.body.items.length === 1;
    });
    expect(tagsAt('/stored', 'k-stored')).toEqual(['u0']);
    const changed = await call(api.url, 'PATCH', '/v1/endpoints/stored', { token: admin, body: { ordering: 'relaxed' } });
    expect(changed.body.ordering).toBe('relaxed');
  }, 30_000);

  it('skip-head leaves the head dead and lets the key go on', async () => {
    refuse = new Set(['t1']);
    await notifyKeyed('k-skip', ['t0', 't1', 't2'], 'strict.updated');
    const head = await waitFor(async () => {
      const res = await call(api.url, 'GET', '/v1/ordering/blocked?endpoint=strict', { token: viewer });
      return res.body.items.find((k: { ordering_key: string }) => k.ordering_key === 'k-skip')?.head_job_id as string | undefined;
    });
    const body = { endpoint: 'strict', ordering_key: 'k-skip' };
    const skipped = await call(api.url, 'POST', '/v1/ordering/blocked/skip-head', { token: admin, body });
    expect(skipped.body).toEqual({ ...body, head_job_id: head, action: 'skipped' });
    await waitFor(() => tagsAt('/strict', 'k-skip').length === 3);
    expect(tagsAt('/strict', 'k-skip')).toEqual(['t0', 't1', 't2']);
    const job = await call(api.url, 'GET', `/v1/jobs/${head}`, { token: viewer });
    expect(job.body.status).toBe('dead');
    await waitFor(async () => (await live('k-skip')) === 0);
  }, 30_000);

  it('a head deleted by hand leaves its key waiting until skip-head moves it on', async () => {
    // Paused: the head stays pending, so it can be deleted before it is sent.
    expect((await call(api.url, 'POST', '/v1/endpoints/relaxed/pause', { token: admin, body: {} })).status).toBe(200);
    await notifyKeyed('k-gone', ['g0', 'g1', 'g2'], 'relaxed.updated');
    const head = (await db.pool.query(`select head from ordering_keys where endpoint = 'relaxed' and ordering_key = 'k-gone'`)).rows[0]
      .head;
    await db.pool.query(`delete from job_queue where id = $1`, [head]);
    expect((await call(api.url, 'POST', '/v1/endpoints/relaxed/resume', { token: admin, body: {} })).status).toBe(200);
    const body = { endpoint: 'relaxed', ordering_key: 'k-gone' };
    // The key is not blocked, and a live head is not skipped: the 409 stands for a key that is merely busy.
    const busy = { endpoint: 'relaxed', ordering_key: 'k-busy' };
    expect((await call(api.url, 'POST', '/v1/endpoints/relaxed/pause', { token: admin, body: {} })).status).toBe(200);
    await notifyKeyed('k-busy', ['b0', 'b1'], 'relaxed.updated');
    const refused = await call(api.url, 'POST', '/v1/ordering/blocked/skip-head', { token: admin, body: busy });
    expect(refused.status).toBe(409);
    expect(refused.body.error.details.field).toBe('ordering_key');
    expect((await call(api.url, 'POST', '/v1/endpoints/relaxed/resume', { token: admin, body: {} })).status).toBe(200);
    await waitFor(() => tagsAt('/relaxed', 'k-busy').length === 2);
    // The deleted head's key waits: nothing of it went while k-busy was delivered.
    expect(tagsAt('/relaxed', 'k-gone')).toEqual([]);
    const skipped = await call(api.url, 'POST', '/v1/ordering/blocked/skip-head', { token: admin, body });
    expect(skipped.body).toEqual({ ...body, head_job_id: head, action: 'skipped' });
    await waitFor(() => tagsAt('/relaxed', 'k-gone').length === 2);
    expect(tagsAt('/relaxed', 'k-gone')).toEqual(['g1', 'g2']);
    await waitFor(async () => (await live('k-gone')) === 0);
  }, 30_000);
});

const perKey = (list: ReceivedRequest[], k: string) =>
  list.filter((r) => r.headers['x-acw-ordering-key'] === `rp-${k}`).map((r) => [r.headers['x-acw-sequence'], r.headers['x-acw-event-id']]);

describe('operators and holds', () => {
  it('a paused endpoint holds the key in order; cancelling a waiting job or the head lets the rest go in order', async () => {
    expect((await call(api.url, 'POST', '/v1/endpoints/strict/pause', { token: admin, body: {} })).status).toBe(200);
    await notifyKeyed('k-held', ['h0', 'h1', 'h2', 'h3'], 'strict.updated');
    const jobs = (await db.pool.query(`select id, status from job_queue where ordering_key = 'k-held' order by ordering_seq`)).rows.map(
      (r) => r.id as string,
    );
    expect(jobs).toHaveLength(4);
    // The one behind the head and the head itself: both pending to an operator, both cancelled.
    for (const id of [jobs[1], jobs[0]]) {
      const res = await call(api.url, 'POST', `/v1/jobs/${id}/cancel`, { token: admin, body: {} });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('cancelled');
    }
    expect((await call(api.url, 'POST', '/v1/endpoints/strict/resume', { token: admin, body: {} })).status).toBe(200);
    await waitFor(() => tagsAt('/strict', 'k-held').length === 2, 15_000);
    expect(tagsAt('/strict', 'k-held')).toEqual(['h2', 'h3']);
    await waitFor(async () => (await live('k-held')) === 0);
  }, 30_000);

  it('an open circuit holds every key; once closed, each resumes in order', async () => {
    const events = [];
    for (let n = 0; n < 5; n++) for (const k of ['a', 'b', 'c']) events.push({ topic: 'flaky.x', data: { n }, ordering_key: k });
    expect((await call(api.url, 'POST', '/v1/notify/batch', { token: service, body: { events } })).status).toBe(202);
    await waitFor(async () => (await circuitOf('flaky')) === 'open');
    // Held: one head per key in job_queue, the rest behind it.
    const held = await db.pool.query(
      `select ordering_key, count(*) filter (where status <> 'behind')::int as heads, count(*)::int as n from job_queue where endpoint = 'flaky' group by 1 order by 1`,
    );
    expect(held.rows).toEqual(['a', 'b', 'c'].map((k) => ({ ordering_key: k, heads: 1, n: 5 })));
    down = false;
    await waitFor(
      async () => (await db.pool.query(`select count(*)::int as n from job_queue where endpoint = 'flaky'`)).rows[0].n === 0,
      20_000,
    );
    expect(await circuitOf('flaky')).toBe('closed');
    for (const k of ['a', 'b', 'c']) {
      const firsts: number[] = [];
      const seen = new Set<string>();
      for (const r of rx.requests.filter((q) => q.url === '/flaky' && q.headers['x-acw-ordering-key'] === k)) {
        const id = String(r.headers['x-acw-event-id']);
        if (!seen.has(id)) firsts.push(Number(r.headers['x-acw-sequence']));
        seen.add(id);
      }
      expect({ k, firsts }).toEqual({ k, firsts: [1, 2, 3, 4, 5] });
    }
  }, 40_000);
});

describe('replay', () => {
  it('sends a window again in order per key, sequence numbers kept', async () => {
    const keys = ['a', 'b', 'c'];
    for (let n = 0; n < 6; n++) for (const k of keys) await notifyKeyed(`rp-${k}`, [`${k}${n}`], 'relaxed.updated');
    const ours = () => rx.requests.filter((r) => r.url === '/relaxed' && String(r.headers['x-acw-ordering-key']).startsWith('rp-'));
    await waitFor(() => ours().length === 18);
    await waitFor(async () => (await db.pool.query(`select count(*)::int as n from job_queue where endpoint = 'relaxed'`)).rows[0].n === 0);
    const first = ours();
    rx.requests.length = 0;
    const res = await call(api.url, 'POST', '/v1/endpoints/relaxed/replay', { token: admin, body: { since: '1h', status: 'all' } });
    expect(res.status).toBe(200);
    await waitFor(() => ours().length >= 18);
    const again = ours();
    for (const k of keys) {
      expect(perKey(again, k)).toEqual(perKey(first, k));
      expect(perKey(again, k).map(([s]) => Number(s))).toEqual([1, 2, 3, 4, 5, 6]);
    }
  }, 30_000);
});
