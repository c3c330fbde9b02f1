// What the alert sinks are sent and when their jobs are written (docs/operations.md#alert-sinks):
// the bodies of both formats, the routing that keeps a sink's own trouble from looping, and the
// jobs written in the transaction that raises the alert, at every place an alert is raised.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ALERT_ACTIONS, type AlertAction } from '../../src/admin/alert-actions.js';
import { withTransaction } from '../../src/db/pool.js';
import { raiseEndpointAlert } from '../../src/endpoint-state/alerts.js';
import { sweepExpiredJobs } from '../../src/runners/expiry.js';
import { SEVERITY, slackBody, summary, webhookBody, type SinkAlert } from '../../src/sinks/body.js';
import { AlertSinks } from '../../src/sinks/outlet.js';
import { deadLetterHook } from '../../src/webhook/dead-letter.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, audit_log, endpoint_state restart identity cascade');
});

const at = new Date('2026-03-01T12:00:00.000Z');
const alert = (action: AlertAction, details: Record<string, unknown>, id = 7): SinkAlert => ({ id, action, createdAt: at, details });

const DETAILS: Record<AlertAction, Record<string, unknown>> = {
  'endpoint.circuit_opened': { endpoint: 'shop', opened_at: '2026-03-01T11:59:30.000Z', flaps: 2, last_error: 'connect ECONNREFUSED' },
  'endpoint.circuit_closed': { endpoint: 'shop', open_alert_id: 5, downtime_ms: 125_000, held_deliveries: 40, flaps: 2 },
  'endpoint.failing': { endpoint: 'shop', status_codes: [422, 400], min_attempts: 20 },
  'endpoint.failing_resolved': { endpoint: 'shop', failing_alert_id: 6, dead_jobs: 12, since: 'x', until: 'y' },
  'endpoint.expired': { endpoint: 'shop', count: 30, max_age_ms: 72 * 3600_000 },
  'webhook.dead_letter': { endpoint: 'shop', job_id: 'j-1', topic: 'order.paid', attempts: 6, reason: 'attempts', last_error: 'HTTP 503' },
  'job.dead_letter': { endpoint: null, job_id: 'j-2', type: 'report.build', attempts: 3, reason: 'permanent', last_error: 'boom' },
  'topic.event_rejected': { event_id: 'e-1', topic: 'order.paid', pointer: '/data/order_id', problems: ['/data/order_id: required'] },
  'webhook.key_blocked': { endpoint: 'shop', ordering_key: 'order-7', job_id: 'j-3', last_error: 'HTTP 503' },
};

describe('sink bodies', () => {
  it('every kind of alert has a one-line summary and a severity', () => {
    const lines = ALERT_ACTIONS.map((a) => summary(alert(a, DETAILS[a])));
    expect(lines).toEqual([
      'delivery j-1 of order.paid to endpoint shop went dead after 6 attempts (attempts): HTTP 503',
      'job j-2 (report.build) went dead after 3 attempts (permanent): boom',
      'endpoint shop is down since 2026-03-01T11:59:30.000Z: its circuit is open and its deliveries are held (2 flaps); last error: connect ECONNREFUSED',
      'endpoint shop has recovered after 2m5s down; 40 held deliveries resume',
      '30 held deliveries to endpoint shop went dead: older than notify.webhook.max_age (72h)',
      'endpoint shop is failing: at least half of its last 20 deliveries were refused (422, 400)',
      'endpoint shop is no longer failing; 12 of its jobs went dead meanwhile',
      'outbox event e-1 of order.paid was rejected, delivered to no one: /data/order_id: required',
      'ordering key order-7 of endpoint shop is blocked: its head j-3 went dead (strict ordering); retry or skip the head to let the rest go: HTTP 503',
    ]);
    expect(ALERT_ACTIONS.map((a) => SEVERITY[a])).toEqual([
      'warning',
      'warning',
      'critical',
      'info',
      'critical',
      'critical',
      'info',
      'warning',
      'critical',
    ]);
  });

  it('the webhook format: the alert with its state, and a resolution naming the alert it resolves', () => {
    const closed = JSON.parse(
      webhookBody(alert('endpoint.circuit_closed', DETAILS['endpoint.circuit_closed']), 'https://acw.example.com/ops'),
    );
    expect(closed).toEqual({
      alert_id: 7,
      kind: 'endpoint.circuit_closed',
      severity: 'info',
      state: 'resolved',
      created_at: '2026-03-01T12:00:00.000Z',
      summary: 'endpoint shop has recovered after 2m5s down; 40 held deliveries resume',
      endpoint: 'shop',
      job_id: null,
      resolution: { resolves: 5, opened_at: null, closed_at: null, downtime_ms: 125_000, held_deliveries: 40, flaps: 2 },
      details: DETAILS['endpoint.circuit_closed'],
      dashboard_url: 'https://acw.example.com/ops/#/endpoints',
    });
    const failingOver = JSON.parse(webhookBody(alert('endpoint.failing_resolved', DETAILS['endpoint.failing_resolved']), ''));
    expect(failingOver.resolution).toEqual({ resolves: 6, since: 'x', until: 'y', dead_jobs: 12, status_codes: null });
    const dead = JSON.parse(webhookBody(alert('webhook.dead_letter', DETAILS['webhook.dead_letter']), 'https://acw.example.com'));
    expect(dead).toMatchObject({ state: 'open', resolution: null, job_id: 'j-1', dashboard_url: 'https://acw.example.com/#/jobs/j-1' });
  });

  it('the slack format: only `text`, one line with the link when server.public_url is set, none without; markup escaped', () => {
    const a = alert('endpoint.failing', { endpoint: 'shop', status_codes: [422], min_attempts: 20 });
    expect(JSON.parse(slackBody(a, 'https://acw.example.com/'))).toEqual({
      text:
        '[critical] endpoint shop is failing: at least half of its last 20 deliveries were refused (422) ' +
        '<https://acw.example.com/#/endpoints|open in the dashboard>',
    });
    expect(JSON.parse(slackBody(a, ''))).toEqual({
      text: '[critical] endpoint shop is failing: at least half of its last 20 deliveries were refused (422)',
    });
    const hostile = alert('job.dead_letter', { job_id: 'j', type: 't', attempts: 1, reason: 'permanent', last_error: '<!channel> & <b>' });
    expect(JSON.parse(slackBody(hostile, '')).text).toBe(
      '[warning] job j (t) went dead after 1 attempts (permanent): &lt;!channel&gt; &amp; &lt;b&gt;',
    );
    const sinkJobs = alert('endpoint.circuit_opened', { endpoint: 'sink:ops', opened_at: 'x' });
    expect(JSON.parse(slackBody(sinkJobs, 'https://acw.example.com')).text).toContain(
      '<https://acw.example.com/#/jobs?endpoint=sink%3Aops|',
    );
  });
});

const sinks = new AlertSinks({
  sinks: [
    { name: 'ops', format: 'webhook' },
    { name: 'chat', format: 'slack' },
  ],
  publicUrl: '',
  jobsChannel: 'acw_jobs_test',
  maxAttempts: 6,
});

const sinkJobs = async () =>
  (
    await db.pool.query<{ endpoint: string; topic: string; alert: number }>(
      `select endpoint, payload->>'topic' as topic, (payload->>'body')::jsonb->'alert_id' as alert from jobs where endpoint like 'sink:%'
       order by endpoint`,
    )
  ).rows;

const raise = (c: Parameters<typeof raiseEndpointAlert>[0]) =>
  raiseEndpointAlert(c, 'acw_alerts_test', { action: 'endpoint.failing', endpoint: 'shop', details: { status_codes: [422] } }, sinks);
const names = (a: AlertAction, endpoint: string | null) => sinks.targets(alert(a, { endpoint })).map((s) => s.name);

/** A job the queue sends dead, as the dead-letter hook is given it. */
const dead = (id: string, endpoint: string) => ({
  id,
  type: 'webhook.deliver',
  payload: { topic: 'order.paid' },
  attempts: 1,
  maxAttempts: 6,
  lastError: 'HTTP 422',
  eventId: null,
  endpoint,
  reason: 'permanent' as const,
});

describe('sink jobs', () => {
  it('are written in the transaction that raises the alert: rolled back, neither is there; committed, both are', async () => {
    await expect(
      withTransaction(db.pool, async (c) => {
        await raise(c);
        throw new Error('the change the alert reports failed');
      }),
    ).rejects.toThrow('the change the alert reports failed');
    expect(await sinkJobs()).toEqual([]);
    expect((await db.pool.query('select count(*)::int as n from audit_log')).rows[0].n).toBe(0);

    const id = await withTransaction(db.pool, raise);
    expect(await sinkJobs()).toEqual([
      { endpoint: 'sink:chat', topic: 'endpoint.failing', alert: null },
      { endpoint: 'sink:ops', topic: 'endpoint.failing', alert: id },
    ]);
  });

  it("no loop: a sink's dead or expired jobs go to no sink; its circuit and failing go to the other sinks only", () => {
    expect(names('webhook.dead_letter', 'shop')).toEqual(['ops', 'chat']);
    expect(names('job.dead_letter', null)).toEqual(['ops', 'chat']);
    expect(names('webhook.dead_letter', 'sink:ops')).toEqual([]);
    expect(names('endpoint.expired', 'sink:ops')).toEqual([]);
    for (const a of ['endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.failing', 'endpoint.failing_resolved'] as const) {
      expect(names(a, 'sink:ops')).toEqual(['chat']);
      expect(names(a, 'sink:chat')).toEqual(['ops']);
    }
  });

  it("a dead letter goes to the sinks in the transaction that sends its job dead, except a failing endpoint's", async () => {
    await db.pool.query(`insert into endpoint_state (endpoint, failing, failing_since) values ('refuses', true, now())`);
    const hook = deadLetterHook('acw_alerts_test', sinks);
    const [a, b] = [crypto.randomUUID(), crypto.randomUUID()];
    await withTransaction(db.pool, (c) => hook(c, [dead(a, 'shop'), dead(b, 'refuses')]));
    // Both are alerts; only the one whose endpoint is not failing goes to the sinks.
    expect((await db.pool.query(`select count(*)::int as n from audit_log where action = 'webhook.dead_letter'`)).rows[0].n).toBe(2);
    const bodies = await db.pool.query(`select endpoint, (payload->>'body')::jsonb as body from jobs where endpoint = 'sink:ops'`);
    expect(bodies.rows).toEqual([{ endpoint: 'sink:ops', body: expect.objectContaining({ kind: 'webhook.dead_letter', job_id: a }) }]);
    expect((await sinkJobs()).map((j) => j.endpoint)).toEqual(['sink:chat', 'sink:ops']);
    expect((await db.pool.query(`select failing_dead from endpoint_state where endpoint = 'refuses'`)).rows[0].failing_dead).toBe(1);
  });

  it('an expiry sweep sends its endpoint.expired alert to the sinks, in its transaction', async () => {
    await db.pool.query(
      `insert into jobs (type, payload, max_attempts, endpoint, status, run_at, series_started_at)
       select 'webhook.deliver', '{"topic":"order.paid","body":"{}"}', 6, 'shop', 'pending', now(), now() - interval '4 days'
       from generate_series(1, 3)`,
    );
    const res = await sweepExpiredJobs(db.pool, {
      maxAgeMs: 72 * 3600_000,
      alertsChannel: 'acw_alerts_test',
      alertSinks: sinks,
      log: captureLogs().log,
    });
    expect(res.expired).toBe(3);
    const jobs = await sinkJobs();
    expect(jobs.map((j) => [j.endpoint, j.topic])).toEqual([
      ['sink:chat', 'endpoint.expired'],
      ['sink:ops', 'endpoint.expired'],
    ]);
    const body = (await db.pool.query(`select payload->>'body' as b from jobs where endpoint = 'sink:ops'`)).rows[0].b;
    expect(JSON.parse(body)).toMatchObject({ kind: 'endpoint.expired', endpoint: 'shop', details: { count: 3 } });
  });
});
