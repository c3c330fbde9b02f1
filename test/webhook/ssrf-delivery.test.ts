// The SSRF guard in a running service (docs/operations.md#ssrf-guard): a config endpoint with
// `ssrf_guard: true` pointed at a receiver on 127.0.0.1 (or on ::1, by an IPv6 literal) goes dead at
// once, naming loopback, and is delivered once notify.webhook.allow_networks opens the range.
// Endpoints created through the API: ssrf-delivery-stored.test.ts.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users, runner_state cascade',
  );
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
    // What to change, by its key: an operator reading the job's error needs nothing else.
    expect(att[0].error).toContain('to allow it, add "127.0.0.0/8" to notify.webhook.allow_networks');
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

  describe('an IPv6 literal (http://[::1]:port/, a receiver on ::1)', () => {
    const got: string[] = [];
    let v6url = '';
    const server = createServer((req, res) => {
      got.push(req.url ?? '');
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    beforeAll(async () => {
      await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
      v6url = `http://[::1]:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    // The connector's own check: net.connect never calls the guard's lookup for an IP literal.
    it('is refused with nothing allowed: dead after one attempt, blocked_address naming ::1/128, nothing sent', async () => {
      const { svc } = await service({ url: `${v6url}/v6` });
      const id = await send(svc);
      await waitStatus(id, 'dead');
      const att = await attempts(id);
      expect(att).toHaveLength(1);
      expect(att[0]).toMatchObject({ status_code: null, error_kind: 'blocked_address' });
      expect(att[0].error).toContain('::1 is in loopback ::1/128');
      expect(got).toEqual([]);
    });

    it('is delivered once allow_networks opens ::1/128 (127.0.0.0/8 alone does not)', async () => {
      const v4 = await service({ url: `${v6url}/v4-only` }, { allow_networks: ['127.0.0.0/8'] });
      const refused = await send(v4.svc);
      await waitStatus(refused, 'dead');
      expect((await attempts(refused))[0]).toMatchObject({ error_kind: 'blocked_address' });
      await Promise.all(services.splice(0).map((s) => s.stop()));
      const { svc } = await service({ url: `${v6url}/v6` }, { allow_networks: ['::1/128'] });
      const id = await send(svc);
      await waitStatus(id, 'completed');
      expect(got).toEqual(['/v6']);
    });
  });
});
