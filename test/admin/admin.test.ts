import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { followAlerts, readAlerts, type AlertView } from '../../src/admin/alerts.js';
import { endpointHealth } from '../../src/endpoint-state/health.js';
import { ApiError } from '../../src/errors.js';
import { cancelJob, getJob, listJobs, redriveJobs, retryJob } from '../../src/admin/jobs.js';
import { listInboxMessages, markInboxMessageRead } from '../../src/admin/inbox.js';
import { addUser, authenticate, listUsers, revokeUser } from '../../src/admin/users.js';
import type { Endpoint } from '../../src/config/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
});

/** The ApiError a call rejects with (fails the test when it resolves or throws anything else). */
async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe('users', () => {
  it('addUser shows a token once, stores only its hash, and authenticate finds the user by it', async () => {
    const u = await addUser(db.pool, { name: 'ci-bot', role: 'service' }, 'ops');
    expect(u.token).toMatch(/^acw_[A-Za-z0-9_-]{43}$/);
    const stored = await db.pool.query(`select token_hash from users where name = 'ci-bot'`);
    expect(stored.rows[0].token_hash).not.toContain(u.token);
    expect(await authenticate(db.pool, u.token)).toMatchObject({ name: 'ci-bot', role: 'service' });
    expect(await authenticate(db.pool, u.token + 'x')).toBeNull();
    expect(await authenticate(db.pool, '')).toBeNull();
    const audit = await db.pool.query(`select action, actor, target_id, details from audit_log`);
    expect(audit.rows).toEqual([{ action: 'user.add', actor: 'ops', target_id: 'ci-bot', details: { role: 'service' } }]);
    expect(JSON.stringify(audit.rows)).not.toContain(u.token);
  });

  it('a duplicate name is a 409; a bad name or role a 400 naming it', async () => {
    await addUser(db.pool, { name: 'dup', role: 'viewer' }, 'ops');
    expect((await refusal(addUser(db.pool, { name: 'dup', role: 'viewer' }, 'ops'))).status).toBe(409);
    const badName = await refusal(addUser(db.pool, { name: 'has space', role: 'viewer' }, 'ops'));
    expect([badName.status, badName.details?.field]).toEqual([400, 'name']);
    const badRole = await refusal(addUser(db.pool, { name: 'x', role: 'root' }, 'ops'));
    expect([badRole.status, badRole.details?.field]).toEqual([400, 'role']);
  });

  it('revokeUser refuses the token at once, is idempotent, and 404s an unknown name', async () => {
    const u = await addUser(db.pool, { name: 'temp', role: 'admin' }, 'ops');
    const revoked = await revokeUser(db.pool, 'temp', 'ops');
    expect(revoked.revoked_at).toEqual(expect.any(String));
    expect(await authenticate(db.pool, u.token)).toBeNull();
    expect((await revokeUser(db.pool, 'temp', 'ops')).revoked_at).toBe(revoked.revoked_at);
    expect((await refusal(revokeUser(db.pool, 'ghost', 'ops'))).status).toBe(404);
    expect((await db.pool.query(`select 1 from audit_log where action = 'user.revoke'`)).rows).toHaveLength(1);
    expect(await listUsers(db.pool)).toEqual([
      { name: 'temp', role: 'admin', created_at: expect.any(String), revoked_at: revoked.revoked_at },
    ]);
  });

  it('a revoked name can be added again: a new token, the same user; the old token stays refused', async () => {
    const old = await addUser(db.pool, { name: 'rotated', role: 'service' }, 'ops');
    const id = (await db.pool.query(`select id from users where name = 'rotated'`)).rows[0].id;
    await revokeUser(db.pool, 'rotated', 'ops');
    const fresh = await addUser(db.pool, { name: 'rotated', role: 'viewer' }, 'ops');
    expect(fresh.token).not.toBe(old.token);
    expect(await authenticate(db.pool, old.token)).toBeNull();
    expect(await authenticate(db.pool, fresh.token)).toMatchObject({ name: 'rotated', role: 'viewer' });
    expect((await db.pool.query(`select id, revoked_at from users where name = 'rotated'`)).rows).toEqual([{ id, revoked_at: null }]);
    const audit = await db.pool.query(`select details from audit_log where action = 'user.add' and target_id = 'rotated' order by id`);
    expect(audit.rows.map((r) => r.details)).toEqual([{ role: 'service' }, { role: 'viewer', reissued: true }]);
    // A name in use is still a conflict.
    expect((await refusal(addUser(db.pool, { name: 'rotated', role: 'viewer' }, 'ops'))).status).toBe(409);
  });
});

describe('jobs', () => {
  it('bad ids, statuses and cursors are 400s naming the field, never database errors', async () => {
    for (const [p, field] of [
      [getJob(db.pool, 'nope'), 'id'],
      [retryJob(db.pool, "'; drop table jobs; --", 'ops', 'public.acw_jobs'), 'id'],
      [cancelJob(db.pool, '', 'ops'), 'id'],
      [listJobs(db.pool, { status: 'zombie' }), 'status'],
      [listJobs(db.pool, { cursor: 'bm9wZQ' }), 'cursor'],
      [listJobs(db.pool, { event_id: 'x' }), 'event_id'],
      [listJobs(db.pool, { limit: 501 }), 'limit'],
      [listJobs(db.pool, { type: 'a\u0000b' }), 'type'],
      [redriveJobs(db.pool, { status: 'pending' as 'dead' }, 'ops', 'public.acw_jobs'), 'status'],
    ] as const) {
      const err = await refusal(p);
      expect([err.status, err.details?.field]).toEqual([400, field]);
    }
  });

  it('getJob of an unknown id is null; retry and cancel of one a 404', async () => {
    const id = randomUUID();
    expect(await getJob(db.pool, id)).toBeNull();
    expect((await refusal(retryJob(db.pool, id, 'ops', 'public.acw_jobs'))).status).toBe(404);
    expect((await refusal(cancelJob(db.pool, id, 'ops'))).status).toBe(404);
  });
});

async function seed(): Promise<{ alice: string; bob: string; ids: number[] }> {
  const users = await db.pool.query<{ id: string; name: string }>(
    `insert into users (name, role) values ('alice', 'viewer'), ('bob', 'viewer') returning id, name`,
  );
  const alice = users.rows.find((u) => u.name === 'alice')!.id;
  const bob = users.rows.find((u) => u.name === 'bob')!.id;
  const ins = await db.pool.query<{ id: string }>(
    `insert into notifications (user_id, topic, data) select $1, 'a.b', jsonb_build_object('i', i) from generate_series(1, 5) i returning id`,
    [alice],
  );
  await db.pool.query(`insert into notifications (user_id, topic, data) values ($1, 'a.b', '{}')`, [bob]);
  return { alice, bob, ids: ins.rows.map((r) => Number(r.id)) };
}

describe('notifications', () => {
  it('lists only the caller own, newest first, paged; unread_only after markRead', async () => {
    const { alice, ids } = await seed();
    const p1 = await listInboxMessages(db.pool, alice, { limit: 3 });
    expect(p1.items.map((n) => n.id)).toEqual(ids.toReversed().slice(0, 3));
    const p2 = await listInboxMessages(db.pool, alice, { limit: 3, cursor: p1.next_cursor! });
    expect(p2.items.map((n) => n.id)).toEqual(ids.toReversed().slice(3));
    expect(p2.next_cursor).toBeNull();
    const read = await markInboxMessageRead(db.pool, alice, ids[0]!);
    expect(read.read_at).toEqual(expect.any(String));
    expect((await listInboxMessages(db.pool, alice, { unread_only: true })).items).toHaveLength(4);
  });

  it("marking someone else's notification is a 404", async () => {
    const { bob, ids } = await seed();
    expect((await refusal(markInboxMessageRead(db.pool, bob, ids[0]!))).status).toBe(404);
    expect((await db.pool.query(`select 1 from notifications where read_at is not null`)).rows).toHaveLength(0);
  });
});

const addAlert = async (n = 1): Promise<number[]> => {
  const res = await db.pool.query<{ id: string }>(
    `insert into audit_log (action, actor, target_type, target_id, details)
     select 'webhook.dead_letter', 'system', 'job', gen_random_uuid()::text, jsonb_build_object('reason', 'permanent', 'n', i)
     from generate_series(1, $1::int) i returning id`,
    [n],
  );
  await db.pool.query(`select pg_notify('public.acw_alerts', '')`);
  return res.rows.map((r) => Number(r.id));
};

describe('alerts', () => {
  it('readAlerts: after an id oldest first; without one the most recent; operator actions are not alerts', async () => {
    const ids = await addAlert(5);
    await db.pool.query(`insert into audit_log (action, actor) values ('job.retry', 'ops')`);
    expect((await readAlerts(db.pool, { sinceId: ids[1] })).map((a) => a.id)).toEqual(ids.slice(2));
    expect((await readAlerts(db.pool, { limit: 2 })).map((a) => a.id)).toEqual(ids.slice(3));
    const [a] = await readAlerts(db.pool, { sinceId: ids[3] });
    expect(a).toMatchObject({ id: ids[4], action: 'webhook.dead_letter', reason: 'permanent', n: 5, created_at: expect.any(String) });
  });

  it('followAlerts replays from sinceId, follows NOTIFY, and misses nothing across a dropped LISTEN connection', async () => {
    const [first] = await addAlert(2);
    const got: AlertView[] = [];
    const ctl = new AbortController();
    const done = followAlerts({
      pool: db.pool,
      url: db.url,
      channel: 'public.acw_alerts',
      sinceId: first,
      signal: ctl.signal,
      pollMs: 60_000,
      onAlert: (a) => void got.push(a),
    });
    await waitFor(() => got.length === 1);
    await addAlert();
    await waitFor(() => got.length === 2);
    // Drop the LISTEN connection and write an alert while it is down: the NOTIFY is lost, the reconnect re-reads.
    const listeners = `select pid from pg_stat_activity where application_name = 'acw-webhooks-listener' and datname = current_database()`;
    const [old] = (await db.pool.query<{ pid: number }>(listeners)).rows;
    await db.pool.query(`select pg_terminate_backend($1)`, [old!.pid]);
    await waitFor(async () => !(await db.pool.query<{ pid: number }>(listeners)).rows.some((r) => r.pid === old!.pid));
    const [missed] = await addAlert();
    await waitFor(() => got.some((a) => a.id === missed), 5_000);
    ctl.abort();
    await done;
    const ids = got.map((a) => a.id);
    expect(ids).toEqual([...ids].toSorted((x, y) => x - y));
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('endpointHealth', () => {
  it('reports success rate, percentiles, the last error and never the secret', async () => {
    const ep: Endpoint = {
      name: 'crm',
      url: 'https://user:pw@crm.example/hook',
      secret: 'top-secret',
      topics: ['crm.*'],
      timeout: 1000,
      connect_timeout: 1000,
      max_in_flight: 4,
      rate_limit: 0,
      scheme: 'acw',
      headers: {},
      enabled: true,
      ssrf_guard: false,
      allow_networks: [],
    };
    await db.pool.query(
      `insert into webhook_attempts (job_id, attempt, endpoint, status_code, error_kind, error, duration_ms)
       values (gen_random_uuid(), 1, 'crm', 200, null, null, 10), (gen_random_uuid(), 1, 'crm', 200, null, null, 20),
              (gen_random_uuid(), 1, 'crm', 200, null, null, 30), (gen_random_uuid(), 1, 'crm', 500, 'http_status', 'HTTP 500', 40)`,
    );
    const [h] = await endpointHealth(db.pool, [ep, { ...ep, name: 'idle' }]).then((r) => r);
    expect(h).toMatchObject({
      name: 'crm',
      topics: ['crm.*'],
      attempts: 4,
      success_rate: 0.75,
      last_error: 'HTTP 500',
    });
    // Percentiles come from power-of-two duration buckets (delivery_stats), interpolated within the
    // bucket: the true p50 (25 ms) lies in [15, 31), the true p99 (39.7 ms) in [31, 63).
    expect(h!.p50_duration_ms).toBeGreaterThanOrEqual(15);
    expect(h!.p50_duration_ms).toBeLessThan(31);
    expect(h!.p99_duration_ms).toBeGreaterThanOrEqual(31);
    expect(h!.p99_duration_ms).toBeLessThan(63);
    expect(JSON.stringify(h)).not.toContain('top-secret');
    expect(h!.url).not.toContain('pw');
    const [, idle] = await endpointHealth(db.pool, [ep, { ...ep, name: 'idle' }]);
    expect(idle).toMatchObject({ attempts: 0, success_rate: null, last_attempt_at: null });
  });
});
