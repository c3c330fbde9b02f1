// Connections per endpoint (docs/operations.md#connections): one undici pool per endpoint, sized to
// its max_in_flight, a connect timeout of its own, idle pools closed.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Endpoint } from '../../src/config/index.js';
import { notifyNow } from '../../src/notify/notify.js';
import type { Service } from '../../src/service.js';
import { EndpointAgents } from '../../src/webhook/agents.js';
import { sendWebhook } from '../../src/webhook/send.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

const SECRET = 'test-secret-agents';

function endpoint(name: string, url: string, over: Partial<Endpoint> = {}): Endpoint {
  return {
    name,
    url,
    secret: SECRET,
    topics: ['*'],
    timeout: 5_000,
    connect_timeout: 5_000,
    max_in_flight: 4,
    rate_limit: 0,
    scheme: 'acw',
    headers: {},
    enabled: true,
    ssrf_guard: false,
    allow_networks: [],
    ...over,
  };
}

const post = (agents: EndpointAgents, ep: Endpoint, signal?: AbortSignal) =>
  sendWebhook({
    agent: agents.agentFor(ep),
    url: ep.url,
    headers: { 'content-type': 'application/json' },
    body: '{}',
    timeoutMs: ep.timeout,
    signal,
  });

/**
 * A local port whose connects never complete: a child process listens with a backlog of 1 and
 * then blocks its event loop, so it never accept()s. Once its accept queue is full (filled here),
 * Linux drops further SYNs and a connect hangs until the client gives up.
 */
async function unansweredPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const script =
    "const s = require('node:net').createServer(); s.listen(0, '127.0.0.1', 1, () => {" +
    " process.stdout.write(s.address().port + '\\n'); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); });";
  const child: ChildProcess = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((r) => child.once('exit', r));
  const fillers: Socket[] = [];
  const close = async (): Promise<void> => {
    for (const s of fillers) s.destroy();
    child.kill('SIGKILL');
    await exited;
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
      child.once('exit', (code) => reject(new Error(`listener exited (${code})`)));
    });
    for (;;) {
      if (fillers.length > 64) throw new Error('the accept queue never filled up');
      const s = connect(port, '127.0.0.1').on('error', () => {});
      fillers.push(s);
      const connected = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), 500);
        s.once('connect', () => (clearTimeout(t), resolve(true)));
      });
      if (!connected) return { port, close };
    }
  } catch (err) {
    await close();
    throw err;
  }
}

describe('EndpointAgents', () => {
  let rx: Receiver;
  let agents: EndpointAgents;
  beforeEach(async () => {
    rx = await startReceiver();
  });
  afterEach(async () => {
    await agents.close();
    await rx.close();
  });

  it('gives each endpoint a pool of its own, kept while nothing changes, replaced when its origin or limits change', async () => {
    agents = new EndpointAgents();
    const a = endpoint('a', `${rx.url}/a`);
    const pool = agents.agentFor(a);
    expect(agents.agentFor(a)).toBe(pool);
    expect(agents.agentFor({ ...a })).toBe(pool);
    // Same origin, other endpoint: its own pool.
    expect(agents.agentFor(endpoint('b', `${rx.url}/b`))).not.toBe(pool);
    // Another path on the same origin: the same pool.
    expect(agents.agentFor({ ...a, url: `${rx.url}/a2` })).toBe(pool);
    expect(pool.closed).toBe(false);
    const bigger = agents.agentFor({ ...a, max_in_flight: 8 });
    expect(bigger).not.toBe(pool);
    expect(pool.closed).toBe(true);
    const other = agents.agentFor({ ...a, max_in_flight: 8, connect_timeout: 1_000 });
    expect(other).not.toBe(bigger);
    expect(agents.agentFor({ ...a, max_in_flight: 8, connect_timeout: 1_000, url: 'http://127.0.0.2:1/a' })).not.toBe(other);
    expect(agents.size).toBe(2);
    expect((await post(agents, endpoint('b', `${rx.url}/b`))).outcome).toEqual({ kind: 'delivered', status: 200 });
    // A URL that cannot be sent to still gets a pool (never used): the attempt says what is wrong.
    const bad = endpoint('bad', 'ftp://h.example.com/x');
    expect(agents.agentFor(bad)).toBe(agents.agentFor({ ...bad }));
    expect((await post(agents, bad)).outcome).toMatchObject({ kind: 'permanent', errorKind: 'invalid_request' });
  });

  it('ssrf_guard and allow_networks are part of the pool: turning the guard on replaces it and refuses 127.0.0.1', async () => {
    agents = new EndpointAgents();
    const a = endpoint('a', `${rx.url}/a`);
    const open = agents.agentFor(a);
    expect((await post(agents, a)).outcome).toEqual({ kind: 'delivered', status: 200 });
    const guarded = { ...a, ssrf_guard: true };
    expect(agents.agentFor(guarded)).not.toBe(open);
    expect(agents.agentFor({ ...guarded })).toBe(agents.agentFor(guarded));
    const refused = (await post(agents, guarded)).outcome;
    expect(refused).toMatchObject({ kind: 'permanent', errorKind: 'blocked_address' });
    expect(refused.kind !== 'delivered' && refused.message).toContain('loopback 127.0.0.0/8');
    const allowed = { ...guarded, allow_networks: ['127.0.0.0/8'] };
    expect((await post(agents, allowed)).outcome).toEqual({ kind: 'delivered', status: 200 });
    expect(rx.requests).toHaveLength(2);
  });

  it('a hanging endpoint holds only its own sockets: another endpoint on the same origin delivers meanwhile', async () => {
    agents = new EndpointAgents();
    rx.setResponder((req) => (req.url === '/slow' ? { hang: true } : { status: 200 }));
    const slow = endpoint('slow', `${rx.url}/slow`, { max_in_flight: 2, timeout: 60_000 });
    const fast = endpoint('fast', `${rx.url}/fast`, { max_in_flight: 2 });
    const stop = new AbortController();
    // Twice its pool size: two hang on its sockets, two wait in its own queue.
    const hanging = [1, 2, 3, 4].map(() => post(agents, slow, stop.signal));
    await rx.waitForRequests(2);
    // A generous bound, only so that a failure here reports rather than hangs.
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map(() => post(agents, fast, AbortSignal.timeout(10_000))));
    expect(results.map((r) => r.outcome)).toEqual(results.map(() => ({ kind: 'delivered', status: 200 })));
    // ...while all four slow attempts are still in flight.
    expect(agents.agentFor(slow).stats).toMatchObject({ running: 2, queued: 2 });
    stop.abort(new Error('test over'));
    for (const r of await Promise.all(hanging)) expect(r.outcome).toMatchObject({ kind: 'retry', errorKind: 'aborted' });
    expect(rx.requests.filter((r) => r.url === '/slow')).toHaveLength(2);
    expect(rx.requests.filter((r) => r.url === '/fast')).toHaveLength(6);
  });

  it('closes and drops a pool once idle, not while a request is still on it', async () => {
    agents = new EndpointAgents({ idleMs: 100 });
    rx.setResponder((req) => (req.url === '/held' ? { hang: true } : { status: 200 }));
    const done = endpoint('done', `${rx.url}/done`);
    const held = endpoint('held', `${rx.url}/held`, { timeout: 60_000 });
    const donePool = agents.agentFor(done);
    expect((await post(agents, done)).outcome).toEqual({ kind: 'delivered', status: 200 });
    const stop = new AbortController();
    const holding = post(agents, held, stop.signal);
    await rx.waitForRequests(2);
    const heldPool = agents.agentFor(held);
    await waitFor(() => donePool.closed, 10_000);
    expect(agents.size).toBe(1);
    // Several sweeps later the busy pool is still there.
    await new Promise((r) => setTimeout(r, 500));
    expect(heldPool.closed).toBe(false);
    stop.abort(new Error('test over'));
    await holding;
    await waitFor(() => heldPool.closed, 10_000);
    expect(agents.size).toBe(0);
    // Used again, an endpoint gets a fresh pool.
    expect(agents.agentFor(done)).not.toBe(donePool);
    expect((await post(agents, done)).outcome).toEqual({ kind: 'delivered', status: 200 });
  });
});

describe('connect_timeout', () => {
  let agents: EndpointAgents;
  let blackhole: Awaited<ReturnType<typeof unansweredPort>>;
  beforeAll(async () => {
    blackhole = await unansweredPort();
  });
  afterAll(async () => {
    await blackhole.close();
  });
  afterEach(async () => {
    await agents.close();
  });

  it('a connect that never completes is a timeout outcome after connect_timeout, before the attempt timeout', async () => {
    agents = new EndpointAgents();
    const ep = endpoint('nowhere', `http://127.0.0.1:${blackhole.port}/hook`, { connect_timeout: 300, timeout: 5_000 });
    const res = await post(agents, ep);
    expect(res.outcome).toMatchObject({ kind: 'retry', errorKind: 'timeout' });
    expect(res.outcome.kind !== 'delivered' && res.outcome.message).toContain('within 300 ms (connect_timeout)');
    expect(res.durationMs).toBeGreaterThanOrEqual(290);
    expect(res.durationMs).toBeLessThan(ep.timeout);
  });
});

describe('the service: two endpoints on one receiver, one of them hanging', () => {
  let db: TestDatabase;
  let rx: Receiver;
  const services: Service[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db.drop());
  beforeEach(async () => {
    rx = await startReceiver();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.stop()));
    await rx.close();
  });

  it("the healthy endpoint's jobs all complete on their first attempt while the hanging endpoint's are still in flight", async () => {
    rx.setResponder((req) => (req.url === '/slow' ? { hang: true } : { status: 200 }));
    // More than the 64 sockets per origin that the one agent shared by every endpoint used to have.
    const HANGING = 70;
    const { svc } = await startTestService(db, {
      jobs: { workers: HANGING + 10 },
      notify: {
        webhook: {
          endpoints: [
            { name: 'slow', url: `${rx.url}/slow`, secret: SECRET, topics: ['slow.*'], max_in_flight: HANGING, timeout: '60s' },
            { name: 'fast', url: `${rx.url}/fast`, secret: SECRET, topics: ['fast.*'], timeout: '2s' },
          ],
        },
      },
    });
    services.push(svc);
    const send = async (topic: string) =>
      (await notifyNow(svc.db.pool, { topic, data: {} }, 'tester', svc.fanOutContext)).body.job_ids as string[];
    for (let i = 0; i < HANGING; i++) await send('slow.x');
    await rx.waitForRequests(HANGING, 30_000);
    const fast: string[] = [];
    for (let i = 0; i < 10; i++) fast.push(...(await send('fast.x')));
    const done = async () =>
      (
        await db.pool.query(`select count(*)::int as n from jobs where id = any($1) and status <> 'running' and status <> 'pending'`, [
          fast,
        ])
      ).rows[0].n === fast.length;
    await waitFor(done, 20_000);
    const att = await db.pool.query(`select attempt, error_kind from webhook_attempts where endpoint = 'fast'`);
    expect(att.rows).toEqual(fast.map(() => ({ attempt: 1, error_kind: null })));
    // ...and every hanging job is still running, its request still held by the receiver.
    const slow = await db.pool.query(`select status, count(*)::int as n from jobs where endpoint = 'slow' group by status`);
    expect(slow.rows).toEqual([{ status: 'running', n: HANGING }]);
    expect(rx.requests.filter((r) => r.url === '/slow')).toHaveLength(HANGING);
  });

  it("an endpoint's connect_timeout reaches its pool: each connect that never completes is a timeout attempt, retried", async () => {
    const blackhole = await unansweredPort();
    try {
      const { svc } = await startTestService(db, {
        jobs: { max_attempts: 2 },
        notify: {
          webhook: {
            endpoints: [
              {
                name: 'nowhere',
                url: `http://127.0.0.1:${blackhole.port}/hook`,
                secret: SECRET,
                topics: ['*'],
                timeout: '20s',
                connect_timeout: '300ms',
              },
            ],
          },
        },
      });
      services.push(svc);
      const [id] = (await notifyNow(svc.db.pool, { topic: 'a.b', data: {} }, 'tester', svc.fanOutContext)).body.job_ids as string[];
      await waitFor(async () => (await db.pool.query(`select status from jobs where id = $1`, [id])).rows[0]?.status === 'dead', 15_000);
      const att = await db.pool.query(
        `select attempt, error_kind, error, duration_ms from webhook_attempts where job_id = $1 order by attempt`,
        [id],
      );
      expect(att.rows.map((a) => [a.attempt, a.error_kind])).toEqual([
        [1, 'timeout'],
        [2, 'timeout'],
      ]);
      for (const a of att.rows) {
        expect(a.error).toContain('within 300 ms (connect_timeout)');
        expect(a.duration_ms).toBeGreaterThanOrEqual(290);
      }
    } finally {
      await Promise.all(services.splice(0).map((s) => s.stop()));
      await blackhole.close();
    }
  });
});
