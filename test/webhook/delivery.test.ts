import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { notify } from '../../src/outbox.js';
import { notifyNow } from '../../src/notify/notify.js';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { WEBHOOK_JOB } from '../../src/webhook/job.js';
import type { Service } from '../../src/service.js';
import { verifyWebhook } from '../../src/verify.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { rawHeaderObject, startReceiver, type Receiver } from '../helpers/receiver.js';
import { merge, startTestService } from '../helpers/service.js';

const SEED_003 = fileURLToPath(new URL('../helpers/seed003_verify.py', import.meta.url));
const SECRET = 'test-secret-3f9a';

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
  await db.pool.query(`insert into users (name, role) values ('alice', 'admin'), ('bob', 'admin'), ('carol', 'viewer')`);
  rx = await startReceiver();
});
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
  await rx.close();
});

async function service(over: Record<string, unknown> = {}) {
  const webhook = { url: rx.url + '/hook', secret: SECRET, topics: ['workspace.*', 'a.b'], timeout: '2s' };
  const s = await startTestService(db, merge({ notify: { webhook } }, over));
  services.push(s.svc);
  return s;
}

const send = (svc: Service, topic: string, data: unknown = { n: 1 }, extra: Record<string, unknown> = {}) =>
  notifyNow(svc.db.pool, { topic, data, ...extra }, 'tester', svc.fanOutContext);

const job = async (id: string) => (await db.pool.query('select * from jobs where id = $1', [id])).rows[0];
const attempts = async (id: string) =>
  (await db.pool.query('select * from webhook_attempts where job_id = $1 order by attempt', [id])).rows;
const waitStatus = (id: string, status: string, ms = 10_000) => waitFor(async () => (await job(id))?.status === status, ms);

describe('signed delivery', () => {
  it('POSTs the fixed body with the spec headers, verifiable by verifyWebhook and the seed 003 Python check', async () => {
    const { svc, events } = await service();
    const ans = await send(svc, 'workspace.sync_failed', { workspace: 42, msg: 'ü' });
    expect(ans.status).toBe(202);
    const [jobId] = ans.body.job_ids;
    await waitStatus(jobId!, 'completed');
    const [req] = rx.requests;
    const body = req!.body.toString('utf8');
    const parsed = JSON.parse(body);
    expect(Object.keys(parsed)).toEqual(['event_id', 'topic', 'occurred_at', 'data']);
    expect(parsed).toMatchObject({ event_id: ans.body.event_id, topic: 'workspace.sync_failed', data: { workspace: 42, msg: 'ü' } });
    expect(parsed.occurred_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const raw = rawHeaderObject(req!.rawHeaders);
    expect(raw['X-ACW-Topic']).toBe('workspace.sync_failed');
    expect(raw['X-ACW-Event-Id']).toBe(jobId);
    expect(raw['X-ACW-Signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['user-agent']).toMatch(/^acw-webhooks\/\d+\.\d+\.\d+/);
    expect(verifyWebhook({ secret: SECRET, headers: req!.headers, body: req!.body })).toBe(true);
    const py = execFileSync('python3', [SEED_003], {
      input: JSON.stringify({ secret: SECRET, headers: raw, body_b64: req!.body.toString('base64') }),
      encoding: 'utf8',
    }).trim();
    expect(py).toBe('True');
    const att = await attempts(jobId!);
    expect(att).toHaveLength(1);
    expect(att[0]).toMatchObject({ attempt: 1, status_code: 200, error_kind: null, lease_lost: false, response_body: 'ok' });
    const line = events('webhook.attempt')[0]!;
    expect(line).toMatchObject({ job_id: jobId, endpoint: 'default', attempt: 1, status: 200, result: 'completed' });
    expect(typeof line.duration_ms).toBe('number');
    // No secret or signature in any log line.
    const sig = raw['X-ACW-Signature'] as string;
    const all = JSON.stringify(events('webhook.attempt')) + JSON.stringify(events('service.config'));
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain(sig.slice(7));
  });

  it('a scheme: standard endpoint is verified by the standardwebhooks library', async () => {
    const secret = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64');
    const { svc } = await service({
      notify: { webhook: { endpoints: [{ name: 'std', url: rx.url + '/std', secret, topics: ['*'], scheme: 'standard' }] } },
    });
    const ans = await send(svc, 'other.topic');
    expect(ans.body.job_ids).toHaveLength(1);
    await waitStatus(ans.body.job_ids[0]!, 'completed');
    const req = rx.requests[0]!;
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const payload = new Webhook(secret).verify(req.body.toString('utf8'), headers) as { topic: string };
    expect(payload.topic).toBe('other.topic');
    expect(req.headers['webhook-id']).toBe(ans.body.job_ids[0]);
  });

  it('fans one event out to every matching endpoint, each signed with its own secret', async () => {
    const { svc } = await service({
      notify: {
        webhook: { endpoints: [{ name: 'second', url: rx.url + '/second', secret: 'other-secret', topics: ['workspace.sync_failed'] }] },
      },
    });
    const ans = await send(svc, 'workspace.sync_failed');
    expect(ans.body.job_ids).toHaveLength(2);
    await Promise.all(ans.body.job_ids.map((id) => waitStatus(id, 'completed')));
    const byPath = new Map(rx.requests.map((r) => [r.url, r]));
    expect(verifyWebhook({ secret: SECRET, headers: byPath.get('/hook')!.headers, body: byPath.get('/hook')!.body })).toBe(true);
    expect(verifyWebhook({ secret: 'other-secret', headers: byPath.get('/second')!.headers, body: byPath.get('/second')!.body })).toBe(
      true,
    );
    expect(byPath.get('/hook')!.body.equals(byPath.get('/second')!.body)).toBe(true);
  });
});

describe('status policy', () => {
  it.each([400, 404, 410])('a %i goes dead after one attempt, with the dead letter written once', async (status) => {
    rx.setResponder(() => ({ status, body: `nope ${status}` }));
    const { svc, events } = await service();
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    const alerts: string[] = [];
    listener.on('notification', (m) => alerts.push(m.payload ?? ''));
    await listener.query('listen "public.acw_alerts"');
    try {
      const ans = await send(svc, 'a.b');
      const id = ans.body.job_ids[0]!;
      await waitStatus(id, 'dead');
      expect((await job(id)).attempts).toBe(1);
      expect(rx.requests).toHaveLength(1);
      const audit = (await db.pool.query(`select id, action, target_id, details from audit_log`)).rows;
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({
        action: 'webhook.dead_letter',
        target_id: id,
        details: { endpoint: 'default', topic: 'a.b', reason: 'permanent' },
      });
      const notes = (await db.pool.query(`select u.name, n.topic, n.data from notifications n join users u on u.id = n.user_id order by 1`))
        .rows;
      expect(notes.map((n) => [n.name, n.topic])).toEqual([
        ['alice', 'webhook.dead_letter'],
        ['bob', 'webhook.dead_letter'],
      ]);
      await waitFor(() => alerts.length > 0);
      expect(alerts).toEqual([String(audit[0].id)]);
      expect(events('webhook.attempt')[0]).toMatchObject({ status, result: 'dead', error_kind: 'http_status' });
      expect((await attempts(id))[0].response_body).toBe(`nope ${status}`);
    } finally {
      await listener.end();
    }
  });

  it('a 500 then a 200 completes on attempt 2', async () => {
    let n = 0;
    rx.setResponder(() => ({ status: ++n === 1 ? 500 : 200 }));
    const { svc, events } = await service();
    const id = (await send(svc, 'a.b')).body.job_ids[0]!;
    await waitStatus(id, 'completed');
    expect((await job(id)).attempts).toBe(2);
    expect((await attempts(id)).map((a) => a.status_code)).toEqual([500, 200]);
    expect(events('job.fail_retry')).toHaveLength(1);
    expect(events('webhook.attempt').map((l) => l.result)).toEqual(['retry', 'completed']);
    expect(events('webhook.attempt')[0]!.next_retry_at).toEqual(expect.any(String));
  });

  it('a 429 with Retry-After: 3 waits at least 3 s before the next attempt', async () => {
    let n = 0;
    rx.setResponder(() => (++n === 1 ? { status: 429, headers: { 'retry-after': '3' } } : { status: 204 }));
    const { svc } = await service({ jobs: { retry: { base: '10ms', max: '5s', jitter: 0 } } });
    const id = (await send(svc, 'a.b')).body.job_ids[0]!;
    await waitStatus(id, 'completed', 10_000);
    const [first, second] = rx.requests;
    expect(second!.receivedAt - first!.receivedAt).toBeGreaterThanOrEqual(3_000);
  });

  it('a hanging receiver times out and the job retries', async () => {
    let n = 0;
    rx.setResponder(() => (++n === 1 ? { hang: true } : { status: 200 }));
    const { svc } = await service({ notify: { webhook: { timeout: '300ms' } } });
    const id = (await send(svc, 'a.b')).body.job_ids[0]!;
    await waitStatus(id, 'completed');
    const att = await attempts(id);
    expect(att.map((a) => a.error_kind)).toEqual(['timeout', null]);
    expect(att[0].duration_ms).toBeGreaterThanOrEqual(290);
  });

  it('a 302 is not followed: permanent, one request', async () => {
    rx.setResponder((r) => (r.url === '/hook' ? { status: 302, headers: { location: rx.url + '/elsewhere' } } : { status: 200 }));
    const { svc } = await service();
    const id = (await send(svc, 'a.b')).body.job_ids[0]!;
    await waitStatus(id, 'dead');
    expect(rx.requests.map((r) => r.url)).toEqual(['/hook']);
    expect((await attempts(id))[0]).toMatchObject({ status_code: 302, error_kind: 'redirect' });
  });

  it('an unreachable endpoint (127.0.0.1:1) with the default max_attempts (no key in the config): 5 fail_retry lines, one dead row, every admin told', async () => {
    // No max_attempts key at all (the test config sets 3): the schema's default applies.
    const { svc, events } = await service({
      jobs: { max_attempts: undefined, retry: { base: '5ms', max: '20ms', jitter: 0 } },
      notify: { webhook: { url: 'http://127.0.0.1:1/hook' } },
    });
    expect(svc.config.jobs.max_attempts).toBe(6);
    const id = (await send(svc, 'workspace.sync_failed')).body.job_ids[0]!;
    expect((await job(id)).max_attempts).toBe(6);
    await waitStatus(id, 'dead');
    expect(events('job.fail_retry')).toHaveLength(5);
    expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'dead'`)).rows[0].n).toBe(1);
    expect((await attempts(id)).map((a) => a.error_kind)).toEqual(Array(6).fill('connect'));
    const notes = (
      await db.pool.query(
        `select u.name from notifications n join users u on u.id = n.user_id where n.topic = 'webhook.dead_letter' order by 1`,
      )
    ).rows;
    expect(notes.map((n) => n.name)).toEqual(['alice', 'bob']);
  });
});

describe('dispatch rules', () => {
  it('webhook disabled: recipients still get in-app notifications and no webhook job is written', async () => {
    const { svc } = await service({ notify: { webhook: { enabled: false } } });
    const ans = await send(svc, 'workspace.sync_failed', { x: 1 }, { recipients: ['alice', 'carol'] });
    expect(ans.body).toMatchObject({ job_ids: [], skipped: 'webhooks_disabled' });
    expect((await db.pool.query(`select count(*)::int as n from jobs where type = 'webhook.deliver'`)).rows[0].n).toBe(0);
    const notes = (await db.pool.query(`select u.name, n.topic, n.data from notifications n join users u on u.id = n.user_id order by 1`))
      .rows;
    expect(notes).toEqual([
      { name: 'alice', topic: 'workspace.sync_failed', data: { x: 1 } },
      { name: 'carol', topic: 'workspace.sync_failed', data: { x: 1 } },
    ]);
  });

  it('a topic nobody lists writes no job and logs webhook.skipped', async () => {
    const { svc, events } = await service();
    const ans = await send(svc, 'nobody.listens');
    expect(ans.body).toMatchObject({ job_ids: [], skipped: 'no_matching_endpoint' });
    expect((await db.pool.query(`select count(*)::int as n from jobs`)).rows[0].n).toBe(0);
    expect(events('webhook.skipped')[0]).toMatchObject({ topic: 'nobody.listens', reason: 'no_matching_endpoint' });
  });

  it('an unknown recipient is refused and nothing is written', async () => {
    const { svc } = await service();
    await expect(send(svc, 'a.b', {}, { recipients: ['alice', 'mallory'] })).rejects.toMatchObject({
      status: 400,
      details: { names: ['mallory'] },
    });
    expect((await db.pool.query(`select (select count(*) from events)::int as e, (select count(*) from jobs)::int as j`)).rows[0]).toEqual({
      e: 0,
      j: 0,
    });
  });

  it('two concurrent notifies with one idempotency key make one event; a different body with the key is a conflict', async () => {
    const { svc } = await service();
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(svc, 'a.b', { same: true }, { idempotency_key: 'k-1' })));
    expect(answers.map((a) => a.status).toSorted()).toEqual([200, 200, 200, 200, 200, 200, 200, 202]);
    expect(new Set(answers.map((a) => a.body.event_id)).size).toBe(1);
    expect(new Set(answers.map((a) => JSON.stringify(a.body.job_ids))).size).toBe(1);
    expect((await db.pool.query(`select count(*)::int as n from events`)).rows[0].n).toBe(1);
    expect((await db.pool.query(`select count(*)::int as n from jobs`)).rows[0].n).toBe(1);
    await expect(send(svc, 'a.b', { same: false }, { idempotency_key: 'k-1' })).rejects.toMatchObject({ status: 409 });
  });

  it('a job whose endpoint disappeared from the config waits without spending attempts, then goes dead after 24 h', async () => {
    rx.setResponder(() => ({ status: 503 }));
    // One attempt only before the redeploy: the retry is scheduled far out.
    const first = await service({ jobs: { retry: { base: '1m', max: '1m', jitter: 0 } } });
    const id = (await send(first.svc, 'a.b')).body.job_ids[0]!;
    await waitFor(async () => (await job(id)).attempts >= 1 && (await job(id)).status === 'pending');
    await first.svc.stop();
    // Redeployed without the endpoint (a rolling deploy): the job is kept, its attempts untouched.
    const { svc, events } = await startTestService(db, {
      notify: { webhook: { url: '' } },
      jobs: { retry: { base: '50ms', max: '100ms', jitter: 0 } },
    });
    services.push(svc);
    const before = (await job(id)).attempts;
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    const row = await waitFor(async () => {
      const r = await job(id);
      return events('webhook.skipped').length >= 2 && r.status === 'pending' ? r : null;
    }, 5_000);
    expect(row.status).toBe('pending');
    expect(row.attempts).toBe(before);
    expect(row.parked_since).not.toBeNull();
    await db.pool.query(`update jobs set parked_since = now() - interval '25 hours', run_at = now() where id = $1`, [id]);
    await waitStatus(id, 'dead');
    expect((await job(id)).last_error).toMatch(/not configured/);
    expect((await db.pool.query(`select details->>'reason' as r from audit_log`)).rows).toEqual([{ r: 'parked' }]);
  });

  it('a disabled endpoint holds its jobs (never claimed, attempts unspent, not counted as unknown time); a restart with it enabled sends them at once', async () => {
    rx.setResponder(() => ({ status: 503 }));
    const first = await service({ jobs: { retry: { base: '1m', max: '1m', jitter: 0 } } });
    const id = (await send(first.svc, 'a.b')).body.job_ids[0]!;
    await waitFor(async () => (await job(id)).attempts >= 1 && (await job(id)).status === 'pending');
    await first.svc.stop();
    // The operator disables webhooks and redeploys: the job is due, but held like a paused endpoint's.
    const paused = await service({
      notify: { webhook: { enabled: false } },
      jobs: { poll_interval: '20ms', retry: { base: '50ms', max: '400ms', jitter: 0 } },
    });
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    // A job of an endpoint this process does not know, queued after ours fell due: once it has
    // been looked at, claims have run past our job's turn.
    const ghost = await enqueueJobs(
      db.pool,
      [{ type: WEBHOOK_JOB, payload: { topic: 'a.b', body: '{}' }, maxAttempts: 3, endpoint: 'ghost' }],
      paused.svc.channels.jobs,
    );
    await waitFor(() => paused.events('webhook.skipped').some((l) => l.job_id === ghost[0]));
    await paused.svc.stop();
    expect(paused.events('webhook.skipped').filter((l) => l.job_id === id)).toEqual([]);
    expect(await job(id)).toMatchObject({ status: 'pending', attempts: 1, parked_since: null, skipped_since: null });
    // Then the endpoint is dropped from the config: from now on its time counts as unknown (the 24 h rule).
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    const dropped = await service({
      notify: { webhook: { url: '' } },
      jobs: { poll_interval: '20ms', retry: { base: '50ms', max: '400ms', jitter: 0 } },
    });
    await waitFor(() => dropped.events('webhook.skipped').some((l) => l.job_id === id && l.reason === 'endpoint_unknown'));
    await dropped.svc.stop();
    expect(await job(id)).toMatchObject({ status: 'pending', attempts: 1 });
    expect((await job(id)).parked_since).not.toBeNull();
    // Its next look is far off; a process that starts with the endpoint enabled makes it due at once.
    await db.pool.query(`update jobs set run_at = now() + interval '1 hour' where id = $1`, [id]);
    rx.setResponder(() => ({ status: 200 }));
    const back = await service();
    await waitStatus(id, 'completed', 5_000);
    expect(back.events('jobs.unparked')[0]).toMatchObject({ jobs: 1 });
    expect(await job(id)).toMatchObject({ attempts: 2, parked_since: null, skipped_since: null });
  });

  it('a rotated secret applies to pending retries', async () => {
    rx.setResponder(() => ({ status: 500 }));
    const first = await service({ jobs: { retry: { base: '1s', max: '1s', jitter: 0 } } });
    const id = (await send(first.svc, 'a.b')).body.job_ids[0]!;
    await waitFor(async () => (await job(id)).attempts === 1 && (await job(id)).status === 'pending');
    await first.svc.stop();
    rx.setResponder(() => ({ status: 200 }));
    const { svc } = await startTestService(db, { notify: { webhook: { url: rx.url + '/hook', secret: 'rotated', topics: ['a.b'] } } });
    services.push(svc);
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    await waitStatus(id, 'completed');
    const last = rx.requests.at(-1)!;
    expect(verifyWebhook({ secret: 'rotated', headers: last.headers, body: last.body })).toBe(true);
    expect(verifyWebhook({ secret: SECRET, headers: last.headers, body: last.body })).toBe(false);
  });
});

describe('outbox', () => {
  it('an event written in a rolled-back transaction is never delivered; one in a committed transaction is', async () => {
    const { svc } = await service();
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query('begin');
      await notify(c, 'a.b', { tx: 'rolled back' });
      await c.query('rollback');
      await c.query('begin');
      const id = await notify(c, 'a.b', { tx: 'committed' }, { recipients: ['alice'] });
      await c.query('commit');
      await waitFor(
        async () => (await db.pool.query(`select status from jobs where event_id = $1`, [id])).rows[0]?.status === 'completed',
        5_000,
      );
      // A later event, delivered: the dispatcher has been past the rolled-back one's place since.
      const later = await notify(c, 'a.b', { tx: 'later' });
      await waitFor(
        async () => (await db.pool.query(`select status from jobs where event_id = $1`, [later])).rows[0]?.status === 'completed',
        5_000,
      );
      expect(rx.requests.map((r) => JSON.parse(r.body.toString()).data.tx)).toEqual(['committed', 'later']);
      expect((await db.pool.query(`select count(*)::int as n from events`)).rows[0].n).toBe(2);
      expect((await db.pool.query(`select count(*)::int as n from notifications`)).rows[0].n).toBe(1);
    } finally {
      await c.end();
    }
    expect(svc.outboxPump).not.toBeNull();
  });
});
