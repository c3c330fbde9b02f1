// Held made visible (docs/operations.md#held-jobs): a pending job whose endpoint's circuit is open,
// or that is paused, says so in `held` in job lists and job detail; its status stays pending. The
// service runs no workers, so nothing is delivered and held jobs stay put.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listJobs } from '../../src/admin/jobs.js';
import type { Queryable } from '../../src/db/pool.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let api: Api;
let admin: string;
const webhook = {
  endpoints: ['down', 'paused', 'fine', 'off'].map((name) => ({
    name,
    url: `http://127.0.0.1:9/${name}`,
    secret: `${name}-secret`,
    topics: ['*'],
    // Disabled in the config file: only the answering process's config knows it.
    ...(name === 'off' ? { enabled: false } : {}),
  })),
};
beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(db, { jobs: { enabled: false }, notify: { webhook } });
  admin = await makeUser(db.pool, 'ops', 'admin');
});
afterAll(async () => {
  await api.close();
  await db.drop();
});

const get = async (path: string) => (await call(api.url, 'GET', path, { token: admin })).body;

describe('held jobs', () => {
  it('say their circuit, since when and the next probe, or their pause; others read held: null', async () => {
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, circuit_since, opened_at, next_probe_at)
       values ('down', 'half_open', now(), now() - interval '2 minutes', now() - interval '1 second')`,
    );
    expect((await call(api.url, 'POST', '/v1/endpoints/paused/pause', { token: admin })).status).toBe(200);
    const service = await makeUser(db.pool, 'billing', 'service');
    expect((await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'crm.sync', data: {} } })).status).toBe(202);
    const dead = (
      await db.pool.query<{ id: string }>(
        `insert into jobs (type, payload, endpoint, status) values ('webhook.deliver', '{}', 'down', 'dead') returning id`,
      )
    ).rows[0]!.id;

    // Jobs made before their endpoint was disabled wait (a disabled endpoint gets no new ones).
    await db.pool.query(`insert into jobs (type, payload, endpoint) values ('webhook.deliver', '{}', 'off')`);

    const page = await get('/v1/jobs?limit=10');
    const byEndpoint = (ep: string, status = 'pending') =>
      page.items.find((j: { endpoint: string; status: string }) => j.endpoint === ep && j.status === status);
    const state = (await db.pool.query(`select opened_at, next_probe_at from endpoint_state where endpoint = 'down'`)).rows[0];
    expect(byEndpoint('down')).toMatchObject({
      status: 'pending',
      held: {
        reason: 'circuit',
        circuit: 'half_open',
        since: state.opened_at.toISOString(),
        next_probe_at: state.next_probe_at.toISOString(),
      },
    });
    expect(byEndpoint('paused')).toMatchObject({ status: 'pending', held: { reason: 'paused', circuit: 'closed', next_probe_at: null } });
    expect(Date.parse(byEndpoint('paused').held.since)).not.toBeNaN();
    expect(byEndpoint('fine')).toMatchObject({ status: 'pending', held: null });
    expect(byEndpoint('off')).toMatchObject({
      status: 'pending',
      held: { reason: 'disabled', circuit: 'closed', since: null, next_probe_at: null },
    });
    expect((await get(`/v1/jobs/${String(byEndpoint('off').id)}`)).held).toEqual(byEndpoint('off').held);
    // Finished jobs are never held, whatever their endpoint.
    expect(byEndpoint('down', 'dead')).toMatchObject({ id: dead, held: null });

    const detail = await get(`/v1/jobs/${String(byEndpoint('down').id)}`);
    expect(detail.held).toEqual(byEndpoint('down').held);
    // A retried job is pending again, and held at once.
    const retried = await call(api.url, 'POST', `/v1/jobs/${dead}/retry`, { token: admin });
    expect(retried.body).toMatchObject({ status: 'pending', held: { reason: 'circuit', circuit: 'half_open' } });
  });

  it('a page of jobs is read in one statement, held included, however many endpoints hold', async () => {
    const sent: string[] = [];
    const recorder = {
      query: (text: string, values: unknown[]) => {
        sent.push(text);
        return db.pool.query(text, values);
      },
    } as unknown as Queryable;
    const page = await listJobs(recorder, { limit: 50 });
    expect(page.items.some((j) => j.held !== null)).toBe(true);
    expect(sent).toHaveLength(1);
  });
});
