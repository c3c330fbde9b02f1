import { hostname } from 'node:os';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { listProcesses, NO_WORKER_WARNING } from '../../src/admin/processes.js';
import { VERSION } from '../../src/version.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
const stops: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate processes');
});
afterEach(async () => {
  await Promise.all(stops.splice(0).map((s) => s()));
});

async function service(mode: 'serve' | 'worker', over: Record<string, unknown> = {}) {
  const s = await startTestService(db, over, { mode });
  stops.push(() => s.svc.stop());
  return s.svc;
}

async function api(over: Record<string, unknown> = {}): Promise<Api> {
  const a = await startApi(db, over, 'serve', { mode: 'serve' });
  stops.push(() => a.close());
  return a;
}

describe('process registry', () => {
  it('two services register themselves with host, pid, version, mode, runners and in-flight count', async () => {
    const w = await service('worker');
    const s = await service('serve', { jobs: { enabled: false } });
    const { items } = await listProcesses(db.pool);
    expect(items).toHaveLength(2);
    const worker = items.find((p) => p.id === w.workers!.workerId);
    expect(worker).toMatchObject({
      mode: 'worker',
      host: hostname(),
      pid: process.pid,
      version: VERSION,
      jobs: true,
      in_flight: 0,
      gone: false,
    });
    expect(worker!.runners).toEqual(expect.arrayContaining(['job_reaper', 'job_purge', 'job_expiry']));
    const serve = items.find((p) => p.id !== w.workers!.workerId)!;
    // A serve with jobs off has no worker pool: a random id of the same shape, no runners.
    expect(serve).toMatchObject({ mode: 'serve', jobs: false, runners: [], gone: false });
    expect(serve.id).toMatch(new RegExp(`^${hostname()}:${process.pid}:[0-9a-f]{8}$`));
    expect(s.workers).toBeNull();
    expect(Date.parse(worker!.last_seen)).toBeGreaterThanOrEqual(Date.parse(worker!.started_at));
  });

  it('stop() deletes the row', async () => {
    const w = await service('worker');
    expect((await listProcesses(db.pool)).items.map((p) => p.id)).toEqual([w.workers!.workerId]);
    await w.stop();
    expect((await listProcesses(db.pool)).items).toEqual([]);
  });

  it('a row not seen for three beats is shown as gone; one gone for long is deleted by a process registering', async () => {
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, started_at, last_seen) values
         ('h:1:stale', 'worker', 'h', 1, '0.0.1', true, now() - interval '2 minutes', now() - interval '31 seconds'),
         ('h:2:fresh', 'worker', 'h', 2, '0.0.1', true, now() - interval '2 minutes', now() - interval '5 seconds'),
         ('h:3:old', 'worker', 'h', 3, '0.0.1', true, now() - interval '3 hours', now() - interval '2 hours')`,
    );
    const before = await listProcesses(db.pool);
    // Newest seen first.
    expect(before.items.map((p) => [p.id, p.gone])).toEqual([
      ['h:2:fresh', false],
      ['h:1:stale', true],
      ['h:3:old', true],
    ]);
    const w = await service('worker');
    const after = await listProcesses(db.pool);
    expect(after.items.map((p) => p.id)).toEqual([w.workers!.workerId, 'h:2:fresh', 'h:1:stale']);
  });
});

describe('GET /v1/workers', () => {
  it('lists the processes to viewers and admins, newest seen first; service tokens and anonymous callers are refused', async () => {
    const a = await api();
    const viewer = await makeUser(db.pool, 'v', 'viewer');
    const admin = await makeUser(db.pool, 'a', 'admin');
    const svcToken = await makeUser(db.pool, 's', 'service');
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, last_seen) values ('h:1:gone', 'worker', 'h', 1, '0.0.1', true, now() - interval '1 minute')`,
    );
    for (const token of [viewer, admin]) {
      const r = await call(a.url, 'GET', '/v1/workers', { token });
      expect(r.status).toBe(200);
      expect(typeof r.body.now).toBe('string');
      expect(r.body.items.map((p: { id: string; gone: boolean }) => [p.id, p.gone])).toEqual([
        [a.svc.workers!.workerId, false],
        ['h:1:gone', true],
      ]);
      expect(r.body.items[0]).toMatchObject({ mode: 'serve', pid: process.pid, jobs: true, in_flight: 0 });
    }
    expect((await call(a.url, 'GET', '/v1/workers', { token: svcToken })).status).toBe(403);
    expect((await call(a.url, 'GET', '/v1/workers')).status).toBe(401);
  });
});

describe('notify warns when no worker runs', () => {
  it('POST /v1/notify and /v1/notify/batch carry a warning while no process with workers has been seen in the last minute', async () => {
    // A serve without jobs: it answers notify, nothing delivers.
    const a = await api({ jobs: { enabled: false } });
    const token = await makeUser(db.pool, 's', 'service');
    // A worker gone a while ago does not count.
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, last_seen) values ('h:1:gone', 'worker', 'h', 1, '0.0.1', true, now() - interval '61 seconds')`,
    );
    const one = await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: {} } });
    expect(one.status).toBe(202);
    expect(one.body.warning).toBe(NO_WORKER_WARNING);
    const batch = await call(a.url, 'POST', '/v1/notify/batch', { token, body: { events: [{ topic: 'a.b', data: {} }] } });
    expect(batch.status).toBe(202);
    expect(batch.body.warning).toBe(NO_WORKER_WARNING);
    expect(batch.body.results).toHaveLength(1);

    // A worker starts: within the answer's few seconds of caching, the warning is gone.
    await service('worker');
    await waitFor(
      async () => (await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: {} } })).body.warning === undefined,
      30_000,
      200,
    );
    const b2 = await call(a.url, 'POST', '/v1/notify/batch', { token, body: { events: [{ topic: 'a.b', data: {} }] } });
    expect(b2.body).not.toHaveProperty('warning');
  }, 60_000);

  it('a serve that runs jobs itself never warns', async () => {
    const a = await api();
    const token = await makeUser(db.pool, 's', 'service');
    const r = await call(a.url, 'POST', '/v1/notify', { token, body: { topic: 'a.b', data: {} } });
    expect(r.status).toBe(202);
    expect(r.body).not.toHaveProperty('warning');
  });
});
