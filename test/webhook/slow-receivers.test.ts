// Receivers as users have them: some hang, the rest answer in 100 ms. Default config unless a
// test says otherwise: jobs.workers 32, max_in_flight 16, max_in_flight_total 2000, timeout 10 s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../../src/webhook/job.js';
import { call, makeUser, startApi } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const SECRET = 'slow-receivers-secret';
const endpoint = (name: string, url: string, topics: string[], over: Record<string, unknown> = {}) => ({
  name,
  url,
  secret: SECRET,
  topics,
  ...over,
});
/** The shipped defaults for what these tests are about (the test helper shrinks some of them). */
const DEFAULT_JOBS = { workers: 32 };

/** `n` webhook jobs of one endpoint, as the fan-out would insert them. */
const deliveries = (name: string, topic: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    type: WEBHOOK_JOB,
    payload: {
      topic,
      body: buildBody({ id: crypto.randomUUID(), topic, occurredAt: new Date(), data: { i } }),
    } satisfies DeliverPayload,
    maxAttempts: 3,
    endpoint: name,
  }));

describe('slow receivers do not hold back healthy ones', () => {
  it("isolation, default config: two hanging endpoints (one on the healthy one's origin) do not hold back its deliveries", async () => {
    // The hanging endpoints never answer, and their timeout is longer than the test: every slot they
    // take stays taken until the end. The poll is as long: a healthy delivery that arrives was sent
    // because its notify woke the loop, past every hanging one, not found later by a poll.
    const hang1 = await startReceiver(() => ({ hang: true }));
    // The healthy endpoint shares this receiver's origin with the second hanging endpoint.
    const shared = await startReceiver((req) => (req.url === '/hang' ? { hang: true } : { status: 200 }));
    const api = await startApi(db, {
      jobs: { ...DEFAULT_JOBS, poll_interval: '10m', shutdown_grace: '1s' },
      notify: {
        webhook: {
          endpoints: [
            endpoint('hang-one', `${hang1.url}/hang`, ['slow.all'], { timeout: '10m' }),
            endpoint('hang-two', `${shared.url}/hang`, ['slow.all'], { timeout: '10m' }),
            endpoint('healthy', `${shared.url}/ok`, ['fast.*']),
          ],
        },
      },
    });
    const hanging = () => hang1.requests.length + shared.requests.filter((q) => q.url === '/hang').length;
    try {
      const token = await makeUser(db.pool, 'isolation-svc', 'service');
      for (let i = 0; i < 60; i++) {
        const r = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'slow.all', data: { i } } });
        expect(r.status).toBe(202);
        expect(r.body.job_ids).toHaveLength(2);
      }
      // Both hanging endpoints at their max_in_flight (16 each): as many as jobs.workers.
      await waitFor(() => hanging() >= 32, 60_000);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'fast.ping', data: { i } } });
        expect(r.status).toBe(202);
        ids.push(r.body.job_ids[0] as string);
      }
      await waitFor(() => shared.requests.filter((q) => q.url === '/ok').length >= 20, 60_000);
      expect(
        shared.requests
          .filter((q) => q.url === '/ok')
          .map((q) => q.headers['x-acw-event-id'])
          .toSorted(),
      ).toEqual(ids.toSorted());
      // ...while every hanging delivery was still in flight: none had ended to free a slot.
      const ended = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from webhook_attempts where endpoint in ('hang-one', 'hang-two')`,
      );
      expect(ended.rows[0]!.n).toBe(0);
      expect(hanging()).toBeGreaterThanOrEqual(32);
    } finally {
      await api.close();
      await hang1.close();
      await shared.close();
      await db.pool.query(`delete from jobs`);
    }
  }, 180_000);

  it('20 endpoints answering in 100 ms: deliveries are bound by the receivers, not by jobs.workers', async () => {
    // Every request is held until more than jobs.workers (32) are in flight at once: bound by
    // jobs.workers, the deliveries would never get there (the test's hang guard would end it). Then
    // each answers in 100 ms.
    let inFlight = 0;
    let peak = 0;
    let passed!: () => void;
    const beyondWorkers = new Promise<void>((r) => (passed = r));
    const rx = await startReceiver(async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      if (peak > 32) passed();
      await beyondWorkers;
      await new Promise((r) => setTimeout(r, 100));
      inFlight--;
      return { status: 200 };
    });
    const names = Array.from({ length: 20 }, (_, i) => `e${String(i).padStart(2, '0')}`);
    const jobs = 2_000;
    await enqueueJobs(
      db.pool,
      Array.from({ length: jobs }, (_, i) => {
        const name = names[i % names.length]!;
        const topic = `fleet.${name}`;
        const payload: DeliverPayload = { topic, body: buildBody({ id: crypto.randomUUID(), topic, occurredAt: new Date(), data: { i } }) };
        return { type: WEBHOOK_JOB, payload, maxAttempts: 3, endpoint: name };
      }),
      'public.acw_jobs',
    );
    const started = Date.now();
    const running = await startTestService(db, {
      jobs: DEFAULT_JOBS,
      // No timeout inside the test: a held request that timed out would be sent again and counted twice.
      notify: { webhook: { endpoints: names.map((n) => endpoint(n, `${rx.url}/${n}`, [`fleet.${n}`], { timeout: '10m' })) } },
    });
    try {
      await rx.waitForRequests(jobs, 120_000);
      const seconds = (Date.now() - started) / 1000;
      console.log(
        `slow receivers: ${jobs} deliveries to 20 endpoints answering in 100 ms: ${Math.round(jobs / seconds)}/s, peak ${peak} in flight`,
      );
      // jobs.workers (32) no longer bounds deliveries: 20 endpoints x max_in_flight 16 may be in flight.
      expect(peak).toBeGreaterThan(32);
      const completed = async () =>
        (
          await db.pool.query<{ n: number }>(`select count(*)::int as n from jobs where status = 'completed' and endpoint = any($1)`, [
            names,
          ])
        ).rows[0]!.n;
      await waitFor(async () => (await completed()) === jobs, 60_000);
    } finally {
      await running.svc.stop();
      await rx.close();
      await db.pool.query(`delete from jobs`);
    }
  }, 240_000);

  it('fairness: an endpoint with a 5,000-job backlog and one with 10 new jobs: the 10 are claimed in the first cycles', async () => {
    const rx = await startReceiver(async () => {
      await new Promise((r) => setTimeout(r, 100));
      return { status: 200 };
    });
    const eps = [
      endpoint('backlog', `${rx.url}/backlog`, ['big.x'], { max_in_flight: 20 }),
      endpoint('fresh', `${rx.url}/fresh`, ['small.x'], { max_in_flight: 20 }),
    ];
    await enqueueJobs(db.pool, deliveries('backlog', 'big.x', 5_000), 'public.acw_jobs');
    // The backlog is older than the new jobs: oldest-first would hand every slot to it.
    await db.pool.query(`update jobs set run_at = now() - interval '1 hour'`);
    await enqueueJobs(db.pool, deliveries('fresh', 'small.x', 10), 'public.acw_jobs');
    // A budget of 20 deliveries: not enough for both endpoints' caps, so the claim order decides.
    const { svc } = await startTestService(db, { jobs: DEFAULT_JOBS, notify: { webhook: { max_in_flight_total: 20, endpoints: eps } } });
    try {
      await waitFor(() => rx.requests.filter((q) => q.url === '/fresh').length >= 10, 30_000);
      const backlogDone = rx.requests.filter((q) => q.url === '/backlog').length;
      // The 10 went out with the first claims, alongside the backlog's first rounds.
      expect(backlogDone).toBeLessThan(100);
    } finally {
      await svc.stop();
      await rx.close();
      await db.pool.query(`delete from jobs`);
    }
  }, 60_000);

  it('adaptive limit: a receiver that starts timing out drops to a small limit, and climbs back when it answers again', async () => {
    let mode: 'hang' | 'ok' = 'hang';
    const rx = await startReceiver(() => (mode === 'hang' ? { status: 200, delayMs: 2_000 } : { status: 200 }));
    const { svc, events } = await startTestService(db, {
      jobs: { ...DEFAULT_JOBS, max_attempts: 100, retry: { base: '50ms', max: '200ms', jitter: 0 } },
      // The adaptive limit alone: with the circuit breaker on, ten timeouts would hold the endpoint
      // before its limit got down to 1 (test/webhook/circuit.test.ts covers the two together).
      notify: {
        webhook: { circuit: { enabled: false }, endpoints: [endpoint('flaky', `${rx.url}/hook`, ['flaky.x'], { timeout: '300ms' })] },
      },
    });
    try {
      await svc.enqueue(
        Array.from({ length: 300 }, (_, i) => ({
          type: WEBHOOK_JOB,
          payload: {
            topic: 'flaky.x',
            body: buildBody({ id: crypto.randomUUID(), topic: 'flaky.x', occurredAt: new Date(), data: { i } }),
          },
          maxAttempts: 100,
          endpoint: 'flaky',
        })),
      );
      await waitFor(() => svc.limits.limit('flaky') === 1, 20_000);
      expect(events('endpoint.limit_lowered').length).toBeGreaterThanOrEqual(4);
      // While at 1, no more than 1 attempt of it is in flight in this process.
      const before = rx.requests.length;
      mode = 'ok';
      await waitFor(() => svc.limits.limit('flaky') === 16, 20_000);
      expect(rx.requests.length).toBeGreaterThan(before);
      expect(events('endpoint.limit_restored')).toHaveLength(1);
    } finally {
      await svc.stop();
      await rx.close();
      await db.pool.query(`delete from jobs`);
    }
  }, 60_000);
});
