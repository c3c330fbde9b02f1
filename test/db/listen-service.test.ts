// One LISTEN connection per process (docs/operations.md#deployment), against a real Service: the
// connections are counted by the server (pg_stat_activity, and pg_listening_channels() on that
// backend), not by asking our own code; after pg_terminate_backend on it, nothing sent while it
// was down is lost: each consumer re-reads once it is back, long before any poll.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pumpAlerts, latestAlertId, type AlertView } from '../../src/admin/alerts.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { createPool } from '../../src/db/pool.js';
import { channels } from '../../src/db/sql.js';
import { EndpointStates } from '../../src/endpoint-state/endpoint-states.js';
import { pauseEndpoint } from '../../src/endpoint-state/operator.js';
import { TopicCatalog } from '../../src/topics/catalog.js';
import { createTopic } from '../../src/topics/store.js';
import { EndpointRegistry } from '../../src/endpoints/registry.js';
import { codecOf, createStoredEndpoint } from '../../src/endpoints/store.js';
import { AlertHub } from '../../src/http/alert-hub.js';
import { notify } from '../../src/outbox.js';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { Service } from '../../src/service.js';
import { call, makeUser, startApi } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { startProxy } from '../helpers/proxy.js';
import { openSse } from '../helpers/sse.js';
import { testConfig } from '../helpers/service.js';

/** This file's own connections go by this name, the services' pools by theirs (createPool's default). */
const MINE = 'listen-service-test';
const POOL_APP = 'acw-webhooks';

let db: TestDatabase;
let watch: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  watch = new pg.Pool({ connectionString: db.url, max: 4, application_name: MINE });
  watch.on('error', () => undefined);
});
afterAll(async () => {
  await watch.end();
  await db.drop();
});
const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closing.splice(0).toReversed()) await c();
  // Closed cleanly: a stopped service leaves no connection behind (the backend exits just after).
  await waitFor(async () => (await outsideThePool()).length === 0);
});

const CH = channels('public');
const ALL = Object.values(CH).toSorted();
const HOUR = 3_600_000;
/** The endpoint in the config file, paused while the LISTEN connection is down. */
const HOOKS = { name: 'hooks', url: 'http://127.0.0.1:9/hook', secret: 'hooks-secret-0123456789', topics: ['hooks.*'] };

/**
 * Every client backend of this test's database but the services' pools and this file's own: the
 * connections a service opened outside its pool, whatever it named them. Only LISTEN needs one.
 */
async function outsideThePool(): Promise<Array<{ pid: number; app: string }>> {
  const res = await watch.query<{ pid: number; app: string }>(
    `select pid, application_name as app from pg_stat_activity
      where datname = current_database() and backend_type = 'client backend' and application_name not in ($1, $2)`,
    [MINE, POOL_APP],
  );
  return res.rows;
}

/** The one connection outside the pool, once there is exactly one and it is not `old`. */
async function theOne(old?: number): Promise<number> {
  let seen: unknown[] = [];
  const rows = await waitFor(async () => {
    const r = await outsideThePool();
    seen = r;
    return r.length === 1 && r[0]!.pid !== old ? r : null;
  }).catch(() => {
    throw new Error(`expected one connection outside the pool${old ? ` other than ${old}` : ''}, found ${JSON.stringify(seen)}`);
  });
  return rows[0]!.pid;
}

describe('one LISTEN connection per process', () => {
  it('serve: one connection outside the pool, every channel LISTENed on it, one again after pg_terminate_backend', async () => {
    const api = await startApi(db, { notify: { webhook: { endpoints: [HOOKS] } } }, 'serve');
    closing.push(() => api.close());
    // The token cache subscribes on the first authenticated request; the alert stream at start.
    const token = await makeUser(watch, 'ops', 'admin');
    expect((await call(api.url, 'GET', '/v1/jobs', { token })).status).toBe(200);
    // Two SSE clients share the alerts subscription.
    for (let i = 0; i < 2; i++) {
      const sse = await openSse(`${api.url}/v1/alerts/stream`, { authorization: `Bearer ${token}` });
      closing.push(async () => sse.close());
      expect(sse.status).toBe(200);
    }
    await waitFor(async () => (await api.svc.listenHub.listening())?.channels.length === ALL.length);
    const pid = await theOne();
    // pg_listening_channels() answers for its own session: read on that backend, it names them all.
    expect(await api.svc.listenHub.listening()).toEqual({ pid, channels: ALL });

    await watch.query(`select pg_terminate_backend($1)`, [pid]);
    const again = await theOne(pid);
    await waitFor(async () => (await api.svc.listenHub.listening())?.channels.length === ALL.length);
    expect(await api.svc.listenHub.listening()).toEqual({ pid: again, channels: ALL });
    expect(await outsideThePool()).toHaveLength(1);
    expect(api.events('db.listener_lost')).toHaveLength(1);
    expect(api.events('db.listener_back')).toHaveLength(1);
  });

  it('worker: one connection for jobs, events, endpoint state, endpoint definitions and the topic catalog', async () => {
    const api = await startApi(db, {}, 'worker');
    closing.push(() => api.close());
    const pid = await theOne();
    expect(await api.svc.listenHub.listening()).toEqual({
      pid,
      channels: [CH.endpointDefs, CH.endpoints, CH.events, CH.jobs, CH.topics].toSorted(),
    });
  });

  it('no wake-up lost while the connection is down: each consumer re-reads after the reconnect, not at its poll', async () => {
    // Only the LISTEN connection goes through the proxy (the pool reaches PostgreSQL directly), so
    // that it can stay down once killed while everything else works.
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    closing.push(() => proxy.close());
    const listenUrl = new URL(db.url);
    listenUrl.host = `127.0.0.1:${proxy.port}`;
    const config = testConfig(db, { jobs: { poll_interval: '1h' }, notify: { webhook: { endpoints: [HOOKS] } } });
    const { log, events } = captureLogs();
    const pool = createPool({ url: db.url, size: 10, schema: 'public' });
    const codec = codecOf(new SecretBox(randomBytes(32)))!;
    const ran: string[] = [];
    const svc = await Service.start({
      config,
      log,
      mode: 'serve',
      database: { url: listenUrl.toString(), pool, schema: 'public', embedded: null, close: () => pool.end() },
      handlers: { 'test.ping': async (job) => void ran.push(job.id) },
      secretCodec: codec,
      tokenCache: { ttlMs: HOUR },
    });
    closing.push(() => svc.stop());
    // The service's own registry and endpoint state poll every second: these, on its connection,
    // poll hourly, so only a re-read after the reconnect can show them a change within the test.
    const registry = new EndpointRegistry({ pool, listenHub: svc.listenHub, channel: CH.endpointDefs, config, codec, log, pollMs: HOUR });
    await registry.start();
    closing.push(() => registry.stop());
    const states = new EndpointStates({
      pool,
      listenHub: svc.listenHub,
      channel: CH.endpoints,
      alertsChannel: CH.alerts,
      circuit: config.notify.webhook.circuit,
      endpoints: () => svc.registry.byName,
      log,
      refreshMs: HOUR,
    });
    await states.start(null);
    closing.push(() => states.stop());
    const topics = new TopicCatalog({ pool, listenHub: svc.listenHub, channel: CH.topics, config, log, pollMs: HOUR });
    await topics.start();
    closing.push(() => topics.stop());
    // An alert follower as the SSE stream has them, polling hourly.
    const alertHub = new AlertHub({ listenHub: svc.listenHub, channel: CH.alerts });
    await alertHub.start();
    closing.push(() => alertHub.close());
    const alerts: AlertView[] = [];
    const follow = new AbortController();
    const followed = pumpAlerts({
      pool,
      sinceId: await latestAlertId(pool),
      signal: follow.signal,
      subscribe: alertHub.subscribe,
      pollMs: HOUR,
      onAlert: (a) => void alerts.push(a),
    });
    closing.push(async () => {
      follow.abort();
      await followed;
    });
    // The token cache holds a token that only a clear (on a reconnect) can drop within the hour.
    const cache = svc.tokenCache();
    expect(await cache.authenticate(await makeUser(watch, 'cached', 'viewer'))).not.toBeNull();
    expect(cache.size).toBe(1);
    await waitFor(async () => (await svc.listenHub.listening())?.channels.length === ALL.length);
    const pid = await theOne();

    // Killed by the server; the proxy refuses the reconnects until up().
    proxy.refuse();
    await watch.query(`select pg_terminate_backend($1)`, [pid]);
    // A failed retry too: the outage spans reconnect attempts, and it is still one loss.
    await waitFor(() => events('db.listener_retry_failed').length >= 1);
    await waitFor(async () => (await outsideThePool()).length === 0);
    // Written while nobody listens: every NOTIFY of these is lost.
    const [jobId] = await enqueueJobs(pool, [{ type: 'test.ping', payload: {}, maxAttempts: 1 }], CH.jobs);
    const eventId = await notify(pool, 'other.topic', { n: 1 });
    await pauseEndpoint({ pool, endpoints: svc.endpoints, channel: CH.endpoints, log }, HOOKS.name, 'test');
    await createStoredEndpoint(
      { pool, codec, configNames: new Set([HOOKS.name]), channel: CH.endpointDefs, serviceTopics: [], tombstoneMs: HOUR },
      { name: 'stored', url: 'https://stored.example.com/h', topics: ['a.b'] },
      { name: 'test', role: 'admin' },
    );
    const alert = await pool.query<{ id: string }>(
      `insert into audit_log (action, actor, target_type, target_id, details)
       values ('webhook.dead_letter', 'system', 'job', gen_random_uuid()::text, '{}') returning id`,
    );
    await pool.query(`select pg_notify($1, '')`, [CH.alerts]);
    await createTopic({ pool, channel: CH.topics }, { name: 'late.topic', schema: {}, examples: [1] }, 'test');

    proxy.up();
    const seen = async () => ({
      job: ran.includes(jobId!),
      event: (await pool.query(`select 1 from events where id = $1 and dispatched_at is not null`, [eventId])).rows.length === 1,
      paused: states.isHeld(HOOKS.name),
      stored: registry.byName.has('stored'),
      topic: topics.get('late.topic') !== undefined,
      alert: alerts.some((a) => a.id === Number(alert.rows[0]!.id)),
      tokensCleared: cache.size === 0,
    });
    // Waited for together, so that a failure names what was missed.
    await waitFor(async () => Object.values(await seen()).every(Boolean), 20_000).catch(() => undefined);
    expect(await seen()).toEqual({ job: true, event: true, paused: true, stored: true, topic: true, alert: true, tokensCleared: true });
    const again = await theOne(pid);
    expect(await svc.listenHub.listening()).toEqual({ pid: again, channels: ALL });
    // Logged once: one warning for the loss, one line when it is back, the retries between at debug.
    expect(events('db.listener_lost')).toHaveLength(1);
    expect(events('db.listener_back')).toHaveLength(1);
  });
});
