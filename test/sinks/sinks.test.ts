// Alert sinks end to end (docs/operations.md#alert-sinks): real receivers on 127.0.0.1 for the
// customer endpoints and for the sinks, a service in this process, and waits on what the receivers
// got or what the database holds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { verifyWebhookDetailed } from '../../src/verify.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const OPS_SECRET = 'ops-sink-secret-0123456789';

/** `n` deliveries to one endpoint, as the fan-out would insert them. */
const deliveries = (endpoint: string, n: number, maxAttempts = 6) =>
  Array.from({ length: n }, (_, i) => ({
    type: WEBHOOK_JOB,
    payload: {
      topic: 'order.paid',
      body: buildBody({ id: crypto.randomUUID(), topic: 'order.paid', occurredAt: new Date(), data: { i } }),
    } satisfies DeliverPayload,
    maxAttempts,
    endpoint,
  }));

/** A body a sink got, parsed: the assertions read into it freely. */
type Got = { req: ReceivedRequest; body: Record<string, any> }; // oxlint-disable-line typescript/no-explicit-any -- parsed JSON, checked by the assertions

/** A receiver that answers `status()` and keeps the bodies it answered 2xx, parsed. */
async function sinkReceiver(status: () => number): Promise<{ rx: Receiver; ok: Got[] }> {
  const ok: Got[] = [];
  const rx = await startReceiver((req) => {
    const s = status();
    if (s < 300) ok.push({ req, body: JSON.parse(req.body.toString('utf8')) });
    return { status: s };
  });
  return { rx, ok };
}

const sink = (name: string, rx: Receiver, more: Record<string, unknown> = {}) => ({ name, url: `${rx.url}/${name}`, ...more });
const endpoint = (name: string, rx: Receiver) => ({ name, url: `${rx.url}/${name}`, secret: `${name}-secret`, topics: ['*'] });

const count = async (sql: string, values: unknown[] = []): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from (${sql}) q`, values)).rows[0]!.n;

describe('alert sinks', () => {
  it('a signed sink gets the opened alert and its resolution with the downtime; a slack sink gets a line and a link', async () => {
    let down = true;
    const shop = await startReceiver(() => ({ status: down ? 503 : 200 }));
    const ops = await sinkReceiver(() => 200);
    const chat = await sinkReceiver(() => 200);
    const { svc } = await startTestService(db, {
      server: { public_url: 'https://acw.example.com/' },
      jobs: { max_attempts: 6, retry: { base: '500ms', max: '1s', jitter: 0 } },
      notify: {
        webhook: {
          circuit: {
            failure_threshold: 3,
            min_attempts: 1000,
            cooldown: '100ms',
            cooldown_max: '200ms',
            alert_after: '300ms',
            resolve_after: '100ms',
          },
          endpoints: [endpoint('shop', shop)],
        },
      },
      alerts: { sinks: [sink('ops', ops.rx, { secret: OPS_SECRET }), sink('chat', chat.rx, { format: 'slack' })] },
    });
    try {
      await enqueueJobs(db.pool, deliveries('shop', 5), svc.channels.jobs);
      const kinds = () => ops.ok.map((o) => o.body.kind);
      await waitFor(() => kinds().includes('endpoint.circuit_opened'), 30_000);
      down = false;
      await waitFor(() => kinds().includes('endpoint.circuit_closed'), 30_000);

      const opened = ops.ok.find((o) => o.body.kind === 'endpoint.circuit_opened')!;
      const closed = ops.ok.find((o) => o.body.kind === 'endpoint.circuit_closed')!;
      for (const o of [opened, closed]) {
        // Signed as deliveries are: the receiver's own check passes with the sink's secret, and fails with another.
        expect(verifyWebhookDetailed({ secret: OPS_SECRET, headers: o.req.headers, body: o.req.body })).toMatchObject({ ok: true });
        expect(verifyWebhookDetailed({ secret: 'not-the-secret', headers: o.req.headers, body: o.req.body })).toMatchObject({ ok: false });
        expect(o.req.headers['x-acw-topic']).toBe(o.body.kind);
        const audit = await db.pool.query(`select action, details from audit_log where id = $1`, [o.body.alert_id]);
        expect(audit.rows[0]).toMatchObject({ action: o.body.kind, details: o.body.details });
      }
      expect(opened.body).toMatchObject({
        severity: 'critical',
        state: 'open',
        endpoint: 'shop',
        job_id: null,
        resolution: null,
        dashboard_url: 'https://acw.example.com/#/endpoints',
      });
      expect(opened.body.summary).toMatch(/^endpoint shop is down since /);
      expect(closed.body).toMatchObject({
        severity: 'info',
        state: 'resolved',
        endpoint: 'shop',
        resolution: { resolves: opened.body.alert_id, held_deliveries: expect.any(Number), downtime_ms: expect.any(Number) },
      });
      expect(closed.body.resolution.downtime_ms).toBeGreaterThan(0);

      // The slack sink: the same two alerts, one line each with its link, and no signature without a secret.
      await waitFor(() => chat.ok.length >= 2, 30_000);
      const texts = chat.ok.map((o) => o.body.text as string);
      expect(chat.ok.every((o) => Object.keys(o.body).join() === 'text')).toBe(true);
      expect(texts.find((t) => t.startsWith('[critical] endpoint shop is down since'))).toMatch(
        / <https:\/\/acw\.example\.com\/#\/endpoints\|open in the dashboard>$/,
      );
      expect(texts.find((t) => t.startsWith('[resolved] endpoint shop has recovered after'))).toBeDefined();
      expect(chat.ok[0]!.req.headers['x-acw-signature']).toBeUndefined();
      // Its deliveries went through, and nothing about a sink is in the customer endpoints.
      await waitFor(async () => (await count(`select 1 from jobs where endpoint = 'shop' and status = 'completed'`)) === 5, 30_000);
      expect(svc.endpoints.map((e) => e.name)).toEqual(['shop']);
    } finally {
      await svc.stop();
      await Promise.all([shop.close(), ops.rx.close(), chat.rx.close()]);
    }
  }, 90_000);

  it('a sink that is down while alerts are raised gets them all once it is back; customer deliveries flow meanwhile', async () => {
    let sinkUp = false;
    const bad = await startReceiver(() => ({ status: 400, body: 'no such order' }));
    const good = await startReceiver(() => ({ status: 200 }));
    const ops = await sinkReceiver(() => (sinkUp ? 200 : 503));
    const { svc } = await startTestService(db, {
      jobs: { max_attempts: 6, retry: { base: '50ms', max: '200ms', jitter: 0 } },
      notify: {
        webhook: {
          circuit: {
            failure_threshold: 3,
            min_attempts: 1000,
            cooldown: '100ms',
            cooldown_max: '200ms',
            alert_after: '300ms',
            resolve_after: '100ms',
          },
          endpoints: [endpoint('bad', bad), endpoint('good', good)],
        },
      },
      alerts: { sinks: [sink('ops', ops.rx, { secret: OPS_SECRET })] },
    });
    try {
      await enqueueJobs(db.pool, [...deliveries('bad', 10), ...deliveries('good', 50)], svc.channels.jobs);
      // Every customer delivery is done while the sink still refuses: 10 dead letters, 50 delivered.
      await waitFor(async () => (await count(`select 1 from jobs where endpoint = 'good' and status = 'completed'`)) === 50, 60_000);
      await waitFor(async () => (await count(`select 1 from audit_log where action = 'webhook.dead_letter'`)) === 10, 60_000);
      expect(good.requests).toHaveLength(50);
      expect(ops.ok).toHaveLength(0);
      // The sink's own circuit opened on its refusals (its outage alert goes to no other sink: there is none).
      await waitFor(
        async () => (await count(`select 1 from endpoint_state where endpoint = 'sink:ops' and circuit <> 'closed'`)) === 1,
        30_000,
      );

      sinkUp = true;
      await waitFor(() => new Set(ops.ok.map((o) => o.body.alert_id)).size >= 10, 60_000);
      const letters = await db.pool.query<{ id: string }>(`select id from audit_log where action = 'webhook.dead_letter' order by id`);
      const got = new Set(ops.ok.filter((o) => o.body.kind === 'webhook.dead_letter').map((o) => o.body.alert_id));
      expect([...got].toSorted((a, b) => a - b)).toEqual(letters.rows.map((r) => Number(r.id)));
      expect(ops.ok.every((o) => o.body.endpoint === 'bad')).toBe(true);
      expect(ops.ok[0]!.body).toMatchObject({ severity: 'warning', state: 'open', dashboard_url: null });
      expect(ops.ok[0]!.body.summary).toMatch(/^delivery \S+ of order\.paid to endpoint bad went dead after 1 attempts \(permanent\): /);
    } finally {
      await svc.stop();
      await Promise.all([bad.close(), good.close(), ops.rx.close()]);
    }
  }, 120_000);

  it("a sink's dead job raises a dead letter that no sink gets: no loop", async () => {
    const bad = await startReceiver(() => ({ status: 400 }));
    const ops = await sinkReceiver(() => 400);
    const chat = await sinkReceiver(() => 200);
    const { svc } = await startTestService(db, {
      jobs: { max_attempts: 2, retry: { base: '20ms', max: '50ms', jitter: 0 } },
      notify: { webhook: { circuit: { min_attempts: 1000 }, endpoints: [endpoint('lost', bad)] } },
      alerts: { sinks: [sink('pager', ops.rx, { secret: OPS_SECRET }), sink('room', chat.rx, { format: 'slack' })] },
    });
    try {
      // Sinks of their own names: the jobs of the tests above are not theirs.
      await db.pool.query(`delete from audit_log`);
      await enqueueJobs(db.pool, deliveries('lost', 1), svc.channels.jobs);
      // The customer's dead letter reaches both sinks; pager refuses it, so that job goes dead too.
      const sinkLetter = await waitFor(async () => {
        const r = await db.pool.query(
          `select id from audit_log where action = 'webhook.dead_letter' and details->>'endpoint' = 'sink:pager'`,
        );
        return r.rows[0] ?? null;
      }, 30_000);
      // Its dead letter commits with any job it would make: none was made.
      expect(await count(`select 1 from jobs where endpoint in ('sink:pager', 'sink:room')`)).toBe(2);
      expect(await count(`select 1 from audit_log where action = 'webhook.dead_letter'`)).toBe(2);
      await waitFor(() => chat.ok.length === 1, 30_000);
      expect(chat.ok[0]!.body.text).toMatch(/^\[warning\] delivery \S+ of order\.paid to endpoint lost went dead/);
      expect(sinkLetter).toBeDefined();
      await waitFor(
        async () =>
          (await count(`select 1 from jobs where endpoint in ('sink:pager', 'sink:room') and status in ('pending', 'running')`)) === 0,
      );
      expect(ops.rx.requests).toHaveLength(1);
    } finally {
      await svc.stop();
      await Promise.all([bad.close(), ops.rx.close(), chat.rx.close()]);
    }
  }, 60_000);
});
