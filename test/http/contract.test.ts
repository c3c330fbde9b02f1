// The API keeps its contract (src/http/contract/): every operation called, with a success and
// with an error wherever it documents one, each answer checked against the OpenAPI document by the
// test server's hooks (test/helpers/contract.ts); a deliberately wrong answer fails its test.
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import type { SecretCodec } from '../../src/endpoints/store.js';
import { raiseEndpointAlert } from '../../src/endpoint-state/alerts.js';
import { ApiError } from '../../src/errors.js';
import { errorStatuses } from '../../src/http/contract/errors.js';
import { ROUTES, type OperationId } from '../../src/http/contract/routes.js';
import { ROLES } from '../../src/roles.js';
import { call, insertJob, makeUser, startApi, type Api, type CallOptions } from '../helpers/api.js';
import { checkAnswer } from '../helpers/contract.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const codec: SecretCodec = {
  seal: (p) => `test:${Buffer.from(p).toString('hex')}`,
  open: (s) => Buffer.from(s.slice(5), 'hex').toString(),
};

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let admin: string;
let service: string;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(
    db,
    {
      notify: {
        webhook: {
          url: rx.url,
          secret: 's3cret',
          topics: ['workspace.*'],
          service_endpoints: { topics: ['billing.*'] },
          allow_networks: ['127.0.0.0/8'],
        },
      },
    },
    'serve',
    { secretCodec: codec },
  );
  admin = await makeUser(db.pool, 'c-admin', 'admin');
  service = await makeUser(db.pool, 'c-service', 'service');
});
afterAll(async () => {
  await api?.close();
  await rx?.close();
  await db?.drop();
});

const as = (token: string, o: CallOptions = {}): CallOptions => ({ token, ...o });

describe('every operation', () => {
  it('answers as documented, with success and error, each of them called', async () => {
    const seen = new Map<OperationId, Set<number>>();
    const hit = async (op: OperationId, method: string, path: string, o: CallOptions = {}) => {
      const res = await call(api.url, method, path, o);
      (seen.get(op) ?? seen.set(op, new Set()).get(op)!).add(res.status);
      return res;
    };

    await hit('liveness', 'GET', '/healthz');
    await hit('readiness', 'GET', '/readyz');
    await hit('metrics', 'GET', '/metrics');
    await hit('openapi', 'GET', '/openapi.json');
    await hit('asyncapi', 'GET', '/asyncapi.json');
    const page = await hit('dashboard', 'GET', '/');
    const asset = /assets\/[^"]+\.js/.exec(page.text)?.[0] ?? 'assets/missing.js';
    await hit('dashboardAsset', 'GET', `/${asset}`);
    await hit('dashboardAsset', 'GET', '/assets/nope.js');

    const signedIn = await hit('signIn', 'POST', '/v1/session', { body: { token: admin } });
    await hit('signIn', 'POST', '/v1/session', { body: { token: 'acw_wrong' } });
    await hit('getSession', 'GET', '/v1/session', as(admin));
    await hit('getSession', 'GET', '/v1/session');
    const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
    await hit('signOut', 'DELETE', '/v1/session', { headers: { cookie, origin: 'https://elsewhere.example' } });
    await hit('signOut', 'DELETE', '/v1/session', { headers: { cookie, origin: api.url } });

    await hit('listProcesses', 'GET', '/v1/workers', as(admin));
    await hit('listProcesses', 'GET', '/v1/workers', as(service));
    await hit('getStats', 'GET', '/v1/stats?window=24h', as(admin));
    await hit('getStats', 'GET', '/v1/stats?window=1y', as(admin));

    const ev = { topic: 'workspace.synced', data: { n: 1 }, recipients: ['c-admin'], idempotency_key: 'contract-1' };
    const first = await hit('notify', 'POST', '/v1/notify', as(service, { body: ev }));
    await hit('notify', 'POST', '/v1/notify', as(service, { body: ev }));
    await hit('notify', 'POST', '/v1/notify', as(service, { body: { ...ev, data: { n: 2 } } }));
    await hit('notify', 'POST', '/v1/notify', as(service, { body: { topic: 'Not A Topic', data: 1 } }));
    await hit('notifyBatch', 'POST', '/v1/notify/batch', as(service, { body: { events: [{ topic: 'workspace.a', data: null }] } }));
    await hit('notifyBatch', 'POST', '/v1/notify/batch', as(service, { body: { events: [] } }));

    const jobId = first.body.job_ids[0] as string;
    await hit('listJobs', 'GET', '/v1/jobs?limit=2', as(admin));
    await hit('listJobs', 'GET', '/v1/jobs?limit=0', as(admin));
    await hit('getJob', 'GET', `/v1/jobs/${jobId}`, as(admin));
    await hit('getJob', 'GET', '/v1/jobs/00000000-0000-4000-8000-000000000000', as(admin));
    const dead = await insertJob(db.pool, { status: 'dead' });
    const pending = await insertJob(db.pool, { status: 'pending' });
    await hit('retryJob', 'POST', `/v1/jobs/${dead}/retry`, as(admin));
    await hit('retryJob', 'POST', `/v1/jobs/${pending}/retry`, as(admin));
    await hit('cancelJob', 'POST', `/v1/jobs/${pending}/cancel`, as(admin));
    await hit('cancelJob', 'POST', `/v1/jobs/${pending}/cancel`, as(admin));
    await hit('listBlockedKeys', 'GET', '/v1/ordering/blocked?endpoint=default', as(admin));
    await hit('listBlockedKeys', 'GET', '/v1/ordering/blocked?limit=0', as(admin));
    // A blocked key: a dead head recorded as such (docs/operations.md#blocked-keys).
    for (const [key, op, action] of [
      ['contract-k1', 'retryKeyHead', 'retry-head'],
      ['contract-k2', 'skipKeyHead', 'skip-head'],
    ] as const) {
      const head = await insertJob(db.pool, { status: 'dead' });
      await db.pool.query(`update job_history set endpoint = 'default', ordering_key = $1, ordering_seq = 1 where id = $2`, [key, head]);
      await db.pool.query(
        `insert into ordering_keys (endpoint, ordering_key, last_seq, last_pos, head, strict, blocked_at) values ('default', $1, 1, 1, $2, true, now())`,
        [key, head],
      );
      await hit(op, 'POST', `/v1/ordering/blocked/${action}`, as(admin, { body: { endpoint: 'default', ordering_key: key } }));
      await hit(op, 'POST', `/v1/ordering/blocked/${action}`, as(admin, { body: { endpoint: 'default', ordering_key: key } }));
    }
    await hit('redriveJobs', 'POST', '/v1/jobs/redrive', as(admin, { body: { dry_run: true } }));
    await hit('redriveJobs', 'POST', '/v1/jobs/redrive', as(admin, { body: { status: 'pending' } }));

    const ep = { name: 'billing-hooks', url: `${rx.url}/billing`, topics: ['billing.*'] };
    await hit('createEndpoint', 'POST', '/v1/endpoints', as(service, { body: ep }));
    await hit('createEndpoint', 'POST', '/v1/endpoints', as(service, { body: ep }));
    await hit('listEndpoints', 'GET', '/v1/endpoints?window_minutes=5', as(admin));
    await hit('listEndpoints', 'GET', '/v1/endpoints?window_minutes=0', as(admin));
    await hit('getEndpoint', 'GET', '/v1/endpoints/billing-hooks', as(service));
    await hit('getEndpoint', 'GET', '/v1/endpoints/nope', as(service));
    await hit('updateEndpoint', 'PATCH', '/v1/endpoints/billing-hooks', as(service, { body: { description: 'invoices' } }));
    await hit('updateEndpoint', 'PATCH', '/v1/endpoints/nope', as(service, { body: { description: 'x' } }));
    await hit('rotateEndpointSecret', 'POST', '/v1/endpoints/billing-hooks/rotate-secret', as(service));
    await hit('rotateEndpointSecret', 'POST', '/v1/endpoints/billing-hooks/rotate-secret', as(service));
    await hit('pauseEndpoint', 'POST', '/v1/endpoints/billing-hooks/pause', as(admin));
    await hit('pauseEndpoint', 'POST', '/v1/endpoints/nope/pause', as(admin));
    await hit('testEndpoint', 'POST', '/v1/endpoints/billing-hooks/test', as(admin));
    await hit('resumeEndpoint', 'POST', '/v1/endpoints/billing-hooks/resume', as(admin));
    await hit('resumeEndpoint', 'POST', '/v1/endpoints/nope/resume', as(admin));
    await hit('testEndpoint', 'POST', '/v1/endpoints/billing-hooks/test', as(admin));
    await hit('replayEndpoint', 'POST', '/v1/endpoints/billing-hooks/replay', as(admin, { body: { since: '1h', dry_run: true } }));
    await hit('replayEndpoint', 'POST', '/v1/endpoints/billing-hooks/replay', as(admin));
    await hit('deleteEndpoint', 'DELETE', '/v1/endpoints/billing-hooks?force=true', as(service));
    await hit('deleteEndpoint', 'DELETE', '/v1/endpoints/billing-hooks', as(service));

    const topic = { name: 'billing.paid', schema: { type: 'object', required: ['id'] }, examples: [{ id: 1 }] };
    await hit('createTopic', 'POST', '/v1/topics', as(admin, { body: topic }));
    await hit('createTopic', 'POST', '/v1/topics', as(admin, { body: { ...topic, examples: [{}] } }));
    await hit('listTopics', 'GET', '/v1/topics', as(admin));
    await hit('listTopics', 'GET', '/v1/topics', as(service));
    await hit('getTopic', 'GET', '/v1/topics/billing.paid', as(admin));
    await hit('getTopic', 'GET', '/v1/topics/nope', as(admin));
    await hit('updateTopic', 'PATCH', '/v1/topics/billing.paid', as(admin, { body: { deprecated: true } }));
    await hit('updateTopic', 'PATCH', '/v1/topics/nope', as(admin, { body: { deprecated: true } }));
    await hit('addTopicVersion', 'POST', '/v1/topics/billing.paid/versions', as(admin, { body: { schema: {}, examples: [1] } }));
    await hit('addTopicVersion', 'POST', '/v1/topics/nope/versions', as(admin, { body: { schema: {}, examples: [1] } }));
    await hit('sendTopicExample', 'POST', '/v1/topics/billing.paid/send-example', as(admin, { body: { endpoint: 'default' } }));
    await hit('sendTopicExample', 'POST', '/v1/topics/billing.paid/send-example', as(admin, { body: { endpoint: 'nope' } }));

    const notes = await hit('listNotifications', 'GET', '/v1/notifications', as(admin));
    await hit('listNotifications', 'GET', '/v1/notifications?unread_only=maybe', as(admin));
    await hit('markNotificationRead', 'POST', `/v1/notifications/${String(notes.body.items[0]?.id)}/read`, as(admin));
    await hit('markNotificationRead', 'POST', '/v1/notifications/999999/read', as(admin));
    await hit('listAlerts', 'GET', '/v1/alerts', as(admin));
    await hit('listAlerts', 'GET', '/v1/alerts?action=nope', as(admin));
    await raiseEndpointAlert(db.pool, api.svc.channels.alerts, { action: 'endpoint.expired', endpoint: 'gone', details: { count: 1 } });
    const alerts = await hit('listAlerts', 'GET', '/v1/alerts?state=open&acknowledged=false', as(admin));
    await hit('acknowledgeAlert', 'POST', `/v1/alerts/${String(alerts.body.items[0]?.id)}/ack`, as(admin));
    await hit('acknowledgeAlert', 'POST', '/v1/alerts/999999/ack', as(admin));
    await hit('acknowledgeAlerts', 'POST', '/v1/alerts/ack', as(admin, { body: { action: 'webhook.dead_letter' } }));
    await hit('acknowledgeAlerts', 'POST', '/v1/alerts/ack', as(admin, { body: { up_to: -1 } }));
    await hit('streamAlerts', 'GET', '/v1/alerts/stream?action=nope', as(admin));
    // The stream's 200 hijacks the reply: read its head and hang up.
    const ctl = new AbortController();
    const stream = await fetch(`${api.url}/v1/alerts/stream`, { headers: { authorization: `Bearer ${admin}` }, signal: ctl.signal });
    seen.get('streamAlerts')!.add(stream.status);
    ctl.abort();

    const missing: string[] = [];
    for (const r of ROUTES) {
      const got = [...(seen.get(r.operationId) ?? [])];
      if (!got.some((s) => s >= 200 && s < 300)) missing.push(`${r.operationId}: no success (${got.join(', ') || 'not called'})`);
      const refusals = errorStatuses(r).filter((s) => s >= 400 && s < 500);
      if (refusals.length > 0 && !got.some((s) => refusals.includes(s))) missing.push(`${r.operationId}: no error (${got.join(', ')})`);
    }
    expect(missing).toEqual([]);
  });
});

describe('the check of every answer', () => {
  const failures: string[] = [];
  const record = (ctx: { task: { result?: { errors?: ReadonlyArray<{ message?: string }> } } }) =>
    onTestFinished(() => {
      failures.push(...(ctx.task.result?.errors ?? []).map((e) => e.message ?? ''));
    });

  // Both tests below are meant to fail: the server answers against its document, and the check
  // run after each test (test/helpers/contract.ts) must fail it. The next test reads why they failed.
  it.fails('fails the test whose answer does not match its schema', async (ctx) => {
    record(ctx);
    const cache = api.svc.tokenCache();
    vi.spyOn(cache, 'authenticate').mockResolvedValueOnce({ id: '1', name: 'mallory', role: 'root' as never });
    const res = await call(api.url, 'GET', '/v1/session', { token: 'acw_anything' });
    expect(res.status).toBe(200);
  });

  it.fails('fails the test that got an undocumented status', async (ctx) => {
    record(ctx);
    vi.spyOn(api.svc.tokenCache(), 'authenticate').mockRejectedValueOnce(new ApiError(418, 'teapot', 'short and stout'));
    const res = await call(api.url, 'GET', '/v1/session', { token: 'acw_anything' });
    expect(res.status).toBe(418);
  });

  it('failed them for those reasons and no other', () => {
    expect(failures).toEqual([
      expect.stringMatching(/GET \/v1\/session -> 200: \/user\/role must be equal to one of the allowed values/),
      expect.stringMatching(/GET \/v1\/session -> 418: status 418 is not documented for getSession/),
    ]);
  });

  it('finds a field the handler returned that the schema lacks, and a body of the wrong type', () => {
    const raw = { user: { name: 'a', role: 'admin', extra: 1 } };
    expect(
      checkAnswer({
        method: 'GET',
        url: '/v1/session',
        status: 200,
        contentType: 'application/json; charset=utf-8',
        body: '{"user":{"name":"a","role":"admin"}}',
        raw,
      }),
    ).toEqual([expect.stringContaining('user.extra was returned by the handler but is not in the answer')]);
    expect(checkAnswer({ method: 'GET', url: '/v1/session', status: 200, contentType: 'text/plain', body: 'hi' })).toEqual([
      expect.stringContaining('content type text/plain'),
    ]);
    expect(checkAnswer({ method: 'GET', url: undefined, status: 404, contentType: 'application/json', body: '{"oops":1}' })).toEqual([
      expect.stringContaining('not an Error answer'),
    ]);
  });
});

describe('roles', () => {
  it('are the ones the users table accepts', async () => {
    const res = await db.pool.query<{ def: string }>(
      `select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'users'::regclass and contype = 'c'`,
    );
    const listed = res.rows.flatMap((r) => [...r.def.matchAll(/'([a-z]+)'::text/g)].map((m) => m[1]));
    expect(listed.toSorted()).toEqual([...ROLES].toSorted());
  });
});
