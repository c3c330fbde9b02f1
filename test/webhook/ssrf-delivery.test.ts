// The SSRF guard in a running service (docs/operations.md#ssrf-guard): a config endpoint with
// `ssrf_guard: true` pointed at a receiver on 127.0.0.1 goes dead at once, naming loopback, and is
// delivered once notify.webhook.allow_networks opens 127.0.0.0/8.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { notifyNow } from '../../src/notify/notify.js';
import type { Service } from '../../src/service.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
let rx: Receiver;
const services: Service[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate jobs, webhook_attempts, events, notifications, audit_log, users, runner_state cascade');
  rx = await startReceiver();
});
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
  await rx.close();
});

async function service(endpoint: Record<string, unknown>, webhook: Record<string, unknown> = {}) {
  const ep = { name: 'guarded', secret: 'test-secret-ssrf', topics: ['*'], ssrf_guard: true, ...endpoint };
  const s = await startTestService(db, { notify: { webhook: { endpoints: [ep], ...webhook } } });
  services.push(s.svc);
  return s;
}

const send = async (svc: Service) => {
  const ans = await notifyNow(svc.db.pool, { topic: 'a.b', data: { n: 1 } }, 'tester', svc.fanOutContext);
  expect(ans.body.job_ids).toHaveLength(1);
  return ans.body.job_ids[0]!;
};
const job = async (id: string) => (await db.pool.query('select * from jobs where id = $1', [id])).rows[0];
const attempts = async (id: string) =>
  (await db.pool.query('select * from webhook_attempts where job_id = $1 order by attempt', [id])).rows;
const waitStatus = (id: string, status: string) => waitFor(async () => (await job(id))?.status === status, 15_000);

describe('ssrf_guard on a config endpoint', () => {
  it('refuses the receiver on 127.0.0.1: dead after one attempt, blocked_address naming loopback, nothing sent', async () => {
    const { svc, events } = await service({ url: `${rx.url}/hook` });
    const id = await send(svc);
    await waitStatus(id, 'dead');
    const att = await attempts(id);
    expect(att).toHaveLength(1);
    expect(att[0]).toMatchObject({ status_code: null, error_kind: 'blocked_address' });
    expect(att[0].error).toContain('127.0.0.1 is in loopback 127.0.0.0/8');
    expect((await job(id)).last_error).toContain('loopback');
    expect(events('webhook.attempt')[0]).toMatchObject({ endpoint: 'guarded', result: 'dead', error_kind: 'blocked_address' });
    expect(rx.requests).toHaveLength(0);
  });

  it('refuses a host name that resolves to loopback (localhost, through the system resolver)', async () => {
    const { svc } = await service({ url: `http://localhost:${new URL(rx.url).port}/hook` });
    const id = await send(svc);
    await waitStatus(id, 'dead');
    const [att] = await attempts(id);
    expect(att).toMatchObject({ error_kind: 'blocked_address' });
    expect(att.error).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is in loopback/);
    expect(rx.requests).toHaveLength(0);
  });

  it('delivers once allow_networks opens 127.0.0.0/8', async () => {
    const { svc } = await service({ url: `${rx.url}/hook` }, { allow_networks: ['127.0.0.0/8'] });
    const id = await send(svc);
    await waitStatus(id, 'completed');
    expect(rx.requests.map((r) => r.url)).toEqual(['/hook']);
  });

  it('leaves an endpoint without ssrf_guard alone (config endpoints are trusted by default)', async () => {
    const { svc } = await service({ url: `${rx.url}/hook`, ssrf_guard: false });
    const id = await send(svc);
    await waitStatus(id, 'completed');
    expect(rx.requests).toHaveLength(1);
  });
});
