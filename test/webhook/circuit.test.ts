// The circuit breaker against real receivers that go away (docs/operations.md#circuit-breaker):
// an endpoint that refuses connections costs a bounded number of attempts, none of its jobs goes
// dead, and everything arrives once it listens again; of two processes, one probes per cool-down.
// Where the count of cool-downs matters, the test ends each one (endCooldown) rather than waiting.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { WEBHOOK_JOB, buildBody, type DeliverPayload } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor, type LogLine } from '../helpers/logs.js';
import { call, makeUser, startApi } from '../helpers/api.js';
import { startReceiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const SECRET = 'circuit-secret';

/** `n` webhook jobs of one endpoint, as the fan-out would insert them. */
const deliveries = (name: string, n: number, maxAttempts = 6) =>
  Array.from({ length: n }, (_, i) => ({
    type: WEBHOOK_JOB,
    payload: {
      topic: 'down.test',
      body: buildBody({ id: crypto.randomUUID(), topic: 'down.test', occurredAt: new Date(), data: { i } }),
    } satisfies DeliverPayload,
    maxAttempts,
    endpoint: name,
  }));

/** A port nothing listens on (taken from a server that is closed again). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A receiver on a given port that answers 200 and records the job ids it got. */
async function listenOn(port: number, got: string[]): Promise<Server> {
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      got.push(String(req.headers['x-acw-event-id'] ?? req.headers['webhook-id'] ?? ''));
      res.end('ok');
    });
  });
  await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
  return s;
}

async function counts(name: string) {
  const r = await db.pool.query<{ attempts: number; probes: number; dead: number; pending: number; completed: number }>(
    `select (select count(*)::int from webhook_attempts where endpoint = $1 and not probe and not aborted) as attempts,
            (select count(*)::int from webhook_attempts where endpoint = $1 and probe) as probes,
            (select count(*)::int from jobs where endpoint = $1 and status = 'dead') as dead,
            (select count(*)::int from jobs where endpoint = $1 and status = 'pending') as pending,
            (select count(*)::int from jobs where endpoint = $1 and status = 'completed') as completed`,
    [name],
  );
  return r.rows[0]!;
}

/** Log lines of one endpoint with this event (and fields), across the given processes. */
function countLines(processes: ReadonlyArray<{ lines: LogLine[] }>, endpoint: string, event: string, fields: Record<string, unknown> = {}) {
  return processes.reduce(
    (n, p) =>
      n +
      p.lines.filter((l) => l.event === event && l.endpoint === endpoint && Object.entries(fields).every(([k, v]) => l[k] === v)).length,
    0,
  );
}

/**
 * The cool-down of an open circuit ends now (a fake clock for the circuit: its probe is due by the
 * database clock, `next_probe_at`), and every process is told at once, as a cool-down ending on
 * its own would not: the tests below set cool-downs of an hour, so that only this ends one.
 */
async function endCooldown(endpoint: string, channel: string): Promise<void> {
  const r = await db.pool.query(`update endpoint_state set next_probe_at = now() where endpoint = $1 and circuit = 'open'`, [endpoint]);
  expect(r.rowCount, `${endpoint} is open`).toBe(1);
  await db.pool.query(`select pg_notify($1, $2)`, [channel, endpoint]);
}

/**
 * Ends the cool-down with the probe claims of `processes` lined up: the test holds a lock on the
 * jobs table (which the probe claim updates), waits until that many claims wait behind it, and
 * lets them all go at once. Each statement then runs with a snapshot taken after the lock, so
 * all of them see the circuit open: only the claim's own row lock can make one the winner.
 */
async function contestProbe(endpoint: string, channel: string, processes: number): Promise<void> {
  const lock = await db.pool.connect();
  try {
    await lock.query('begin');
    await lock.query('lock table jobs in exclusive mode');
    await endCooldown(endpoint, channel);
    await waitFor(async () => {
      // The probe claim (src/queue/transitions/claims.ts, claimProbes) waiting for the lock, known
      // by its opening words (pg_stat_activity keeps only the first 1 kB of a statement).
      const r = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query like '%t.deadline_ms from endpoint_state%'`,
      );
      return r.rows[0]!.n === processes ? true : null;
    }, 20_000);
    await lock.query('commit');
  } catch (err) {
    await lock.query('rollback');
    throw err;
  } finally {
    lock.release();
  }
}

describe('circuit breaker', () => {
  it('a dead endpoint costs at most threshold + in-flight + probes over 20 cool-downs; all 1,000 arrive once it listens', async () => {
    const port = await closedPort();
    const threshold = 10;
    const inFlight = 16;
    const cooldowns = 20;
    const { svc, lines } = await startTestService(db, {
      jobs: { max_attempts: 6, retry: { base: '20ms', max: '100ms', jitter: 0 } },
      notify: {
        webhook: {
          max_in_flight: inFlight,
          // Cool-downs end when the test says so (endCooldown): 20 of them without waiting 20 timers out.
          circuit: { failure_threshold: threshold, cooldown: '1h', cooldown_max: '2h', alert_after: '1s', resolve_after: '100ms' },
          max_age: '2h',
          endpoints: [{ name: 'down', url: `http://127.0.0.1:${port}/hook`, secret: SECRET, topics: ['*'], timeout: '2s' }],
        },
      },
    });
    const me = [{ lines }];
    let server: Server | null = null;
    try {
      await enqueueJobs(db.pool, deliveries('down', 1000), svc.channels.jobs);
      await waitFor(() => (countLines(me, 'down', 'endpoint.circuit_opened') === 1 ? true : null), 30_000);
      // Opened, then probed once per cool-down, each probe failing (connection refused) and opening it again.
      for (let k = 1; k <= cooldowns; k++) {
        await endCooldown('down', svc.channels.endpoints);
        await waitFor(() => (countLines(me, 'down', 'endpoint.circuit_opened', { from: 'half_open' }) === k ? true : null), 30_000);
        expect(countLines(me, 'down', 'endpoint.probe')).toBe(k);
      }
      // Nothing runs between cool-downs: read when the last probe's job is back.
      const held = await waitFor(async () => {
        const c = await counts('down');
        return c.pending + c.completed === 1000 ? c : null;
      });
      expect(held.dead).toBe(0);
      expect(held.probes).toBe(cooldowns);
      expect(held.attempts).toBeGreaterThanOrEqual(threshold);
      expect(held.attempts).toBeLessThanOrEqual(threshold + inFlight);
      // Open for over alert_after: exactly one alert.
      await waitFor(async () => {
        const a = await db.pool.query(`select 1 from audit_log where action = 'endpoint.circuit_opened' and target_id = 'down'`);
        return a.rowCount === 1 ? true : null;
      });
      // Failed probes were handed back unspent: no job has more attempts than its real tries.
      const spent = await db.pool.query<{ n: number }>(`select coalesce(sum(attempts), 0)::int as n from jobs where endpoint = 'down'`);
      expect(spent.rows[0]!.n).toBe(held.attempts);

      const got: string[] = [];
      server = await listenOn(port, got);
      await endCooldown('down', svc.channels.endpoints);
      await waitFor(async () => ((await counts('down')).completed === 1000 ? true : null), 60_000, 100);
      expect(new Set(got).size).toBe(1000);
      expect(got.length).toBe(1000);
      const after = await counts('down');
      expect(after.dead).toBe(0);
      expect(countLines(me, 'down', 'endpoint.probe')).toBe(cooldowns + 1);
      expect(countLines(me, 'down', 'endpoint.circuit_closed')).toBe(1);
      // Recovered after the "down" alert: one recovery alert.
      await waitFor(async () => {
        const a = await db.pool.query(`select 1 from audit_log where action = 'endpoint.circuit_closed' and target_id = 'down'`);
        return a.rowCount === 1 ? true : null;
      });
      const opened = await db.pool.query(`select 1 from audit_log where action = 'endpoint.circuit_opened' and target_id = 'down'`);
      expect(opened.rowCount).toBe(1);
    } finally {
      await svc.stop();
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    }
  }, 120_000);

  it('two processes: exactly one probe per cool-down though both ask for it at once, against a receiver down and then up', async () => {
    let down = true;
    const rx = await startReceiver(() => (down ? { status: 503 } : { status: 200 }));
    const cfg = {
      jobs: { max_attempts: 6 },
      notify: {
        webhook: {
          max_in_flight: 4,
          circuit: { failure_threshold: 5, cooldown: '1h', cooldown_max: '2h' },
          endpoints: [{ name: 'contested', url: `${rx.url}/c`, secret: SECRET, topics: ['*'] }],
        },
      },
    };
    // Two services on one database: each its own worker pool, endpoint-state cache and LISTEN connection.
    const a = await startTestService(db, cfg);
    const b = await startTestService(db, cfg);
    const both = [a, b];
    const cooldowns = 8;
    try {
      await enqueueJobs(db.pool, deliveries('contested', 40), a.svc.channels.jobs);
      await waitFor(() => (countLines(both, 'contested', 'endpoint.circuit_opened') >= 1 ? true : null), 30_000);
      // What was in flight when it opened has finished: from here only probes reach the receiver.
      await waitFor(async () => {
        const c = await counts('contested');
        const busy = a.svc.workers!.inFlightFor('contested') + b.svc.workers!.inFlightFor('contested');
        return c.pending === 40 && busy === 0 ? true : null;
      }, 30_000);
      for (let k = 1; k <= cooldowns; k++) {
        const sent = rx.requests.length;
        await contestProbe('contested', a.svc.channels.endpoints, 2);
        await waitFor(() => (countLines(both, 'contested', 'endpoint.circuit_opened', { from: 'half_open' }) === k ? true : null), 30_000);
        expect(countLines(both, 'contested', 'endpoint.probe')).toBe(k);
        expect(rx.requests.length - sent).toBe(1);
      }

      // The receiver is back: one probe again, it closes the circuit, and the backlog drains.
      down = false;
      const sent = rx.requests.length;
      await contestProbe('contested', a.svc.channels.endpoints, 2);
      await waitFor(async () => ((await counts('contested')).completed === 40 ? true : null), 30_000);
      expect(countLines(both, 'contested', 'endpoint.probe')).toBe(cooldowns + 1);
      expect(countLines(both, 'contested', 'endpoint.circuit_closed')).toBe(1);
      expect(rx.requests.length - sent).toBe(40);
      expect((await counts('contested')).dead).toBe(0);
    } finally {
      await Promise.all([a.svc.stop(), b.svc.stop()]);
      await rx.close();
    }
  }, 120_000);

  it('two processes: once the open state commits, neither makes more attempts than it had in flight; a pause holds both', async () => {
    let down = true;
    const rx = await startReceiver((req) => (down && req.url === '/shared' ? { status: 503 } : { status: 200 }));
    const inFlight = 4;
    const cfg = {
      jobs: { max_attempts: 6 },
      notify: {
        webhook: {
          max_in_flight: inFlight,
          circuit: { failure_threshold: 10, cooldown: '30s', cooldown_max: '1m' },
          endpoints: [
            { name: 'shared', url: `${rx.url}/shared`, secret: SECRET, topics: ['shared.*'] },
            { name: 'other', url: `${rx.url}/other`, secret: SECRET, topics: ['other.*'] },
          ],
        },
      },
    };
    // Two processes, each with its own API: a pause through one must hold the endpoint in both.
    const a = await startApi(db, cfg);
    const b = await startApi(db, cfg);
    const admin = await makeUser(db.pool, 'circuit-admin', 'admin');
    const toShared = () => rx.requests.filter((r) => r.url === '/shared').length;
    try {
      await enqueueJobs(db.pool, deliveries('shared', 300), a.svc.channels.jobs);
      await waitFor(async () => {
        const r = await db.pool.query(`select 1 from endpoint_state where endpoint = 'shared' and circuit = 'open'`);
        return r.rowCount === 1 ? true : null;
      }, 20_000);
      // Seen committed: from here no claim of either process can take it. Counted from what the
      // receiver had got by then, not from a timestamp (circuit_since is the flush transaction's
      // start, before its commit: claims between the two are legitimate).
      const atOpen = toShared();
      // Attempts already on their way when it opened finish and are written after; no new ones start.
      await waitFor(async () => {
        const r = await db.pool.query(`select 1 from jobs where endpoint = 'shared' and status = 'running'`);
        return r.rowCount === 0 && a.svc.workers!.inFlightFor('shared') + b.svc.workers!.inFlightFor('shared') === 0 ? true : null;
      }, 30_000);
      // Requests the receiver got after the open state was seen committed: only those already
      // claimed then (each process holds at most inFlight of them), none claimed after.
      const late = toShared() - atOpen;
      expect(late).toBeLessThanOrEqual(2 * inFlight);
      // Both processes hold it: nothing of it is claimed by either while other work flows.
      await enqueueJobs(db.pool, deliveries('other', 20), a.svc.channels.jobs);
      await waitFor(async () => ((await counts('other')).completed === 20 ? true : null));
      expect(toShared() - atOpen).toBe(late);
      expect((await counts('shared')).dead).toBe(0);

      // A pause through the API holds the endpoint in both processes too.
      down = false;
      expect((await call(a.url, 'POST', '/v1/endpoints/other/pause', { token: admin })).status).toBe(200);
      // Notified through the other process: claim on dispatch there obeys the pause too (its cache, at most 1 s stale, or the NOTIFY).
      await waitFor(() => (b.svc.endpointStates?.isHeld('other') ? true : null));
      for (let i = 0; i < 10; i++) {
        expect((await call(b.url, 'POST', '/v1/notify', { token: admin, body: { topic: 'other.x', data: { i } } })).status).toBe(202);
      }
      // Close 'shared' by probing now: its backlog drains while 'other' stays paused.
      await endCooldown('shared', a.svc.channels.endpoints);
      await waitFor(async () => ((await counts('shared')).completed === 300 ? true : null), 30_000, 100);
      expect((await counts('other')).completed).toBe(20);
      expect((await call(b.url, 'POST', '/v1/endpoints/other/resume', { token: admin })).status).toBe(200);
      await waitFor(async () => ((await counts('other')).completed === 30 ? true : null));
    } finally {
      await Promise.all([a.close(), b.close()]);
      await rx.close();
    }
  }, 90_000);

  it('flapping: down and up 3 times at the default max_attempts, nothing goes dead and attempts stay bounded', async () => {
    let down = true;
    const rx = await startReceiver(() => (down ? { status: 502 } : { status: 200 }));
    const threshold = 10;
    const inFlight = 8;
    const { svc } = await startTestService(db, {
      jobs: { max_attempts: 6, retry: { base: '50ms', max: '200ms', jitter: 0 } },
      notify: {
        webhook: {
          max_in_flight: inFlight,
          circuit: { failure_threshold: threshold, cooldown: '200ms', cooldown_max: '400ms' },
          endpoints: [{ name: 'flappy', url: `${rx.url}/flap`, secret: SECRET, topics: ['*'] }],
        },
      },
    });
    try {
      let probes = 0;
      for (let cycle = 0; cycle < 3; cycle++) {
        down = true;
        await enqueueJobs(db.pool, deliveries('flappy', 100), svc.channels.jobs);
        await waitFor(async () => {
          const r = await db.pool.query(`select 1 from endpoint_state where endpoint = 'flappy' and circuit = 'open'`);
          return r.rowCount === 1 ? true : null;
        }, 20_000);
        // A couple of failed probes while down.
        const p0 = (await counts('flappy')).probes;
        await waitFor(async () => ((await counts('flappy')).probes >= p0 + 2 ? true : null), 20_000);
        down = false;
        await waitFor(async () => ((await counts('flappy')).completed === 100 * (cycle + 1) ? true : null), 30_000, 100);
        probes = (await counts('flappy')).probes;
      }
      const c = await counts('flappy');
      expect(c.dead).toBe(0);
      // Real attempts: every delivery once, plus per cycle at most the threshold and what was in flight.
      expect(c.attempts - c.completed).toBeLessThanOrEqual(3 * (threshold + inFlight));
      expect(probes).toBeGreaterThanOrEqual(6);
    } finally {
      await svc.stop();
      await rx.close();
    }
  }, 120_000);

  it('a probe that hangs sends the circuit back to open; so does one whose worker died past its deadline', async () => {
    let mode: 'down' | 'hang' = 'down';
    const rx = await startReceiver(() => (mode === 'down' ? { status: 500 } : { hang: true }));
    const { svc, lines } = await startTestService(db, {
      notify: {
        webhook: {
          circuit: { failure_threshold: 3, cooldown: '200ms', cooldown_max: '10s' },
          endpoints: [{ name: 'hangs', url: `${rx.url}/h`, secret: SECRET, topics: ['*'], timeout: '500ms' }],
        },
      },
    });
    try {
      await enqueueJobs(db.pool, deliveries('hangs', 5), svc.channels.jobs);
      await waitFor(async () => (lines.some((l) => l.event === 'endpoint.circuit_opened') ? true : null));
      mode = 'hang';
      // The next probe hangs; its attempt times out (500 ms), the job goes back unspent, the circuit is open again with a longer cool-down.
      const reopened = await waitFor(async () => {
        const r = await db.pool.query<{ error_kind: string; probe: boolean }>(
          `select error_kind, probe from webhook_attempts where endpoint = 'hangs' and probe and error_kind = 'timeout' limit 1`,
        );
        return r.rows[0] ?? null;
      }, 20_000);
      expect(reopened.probe).toBe(true);
      await waitFor(async () => {
        const r = await db.pool.query<{ circuit: string; cooldown_ms: number }>(
          `select circuit, cooldown_ms from endpoint_state where endpoint = 'hangs'`,
        );
        return r.rows[0]!.circuit === 'open' && r.rows[0]!.cooldown_ms > 200 ? true : null;
      });
      expect((await counts('hangs')).dead).toBe(0);

      // A probe whose worker died: its job is left running and the row half-open past the deadline.
      await svc.stop();
      await db.pool.query(
        `update endpoint_state set circuit = 'half_open', probe_job_id = gen_random_uuid(), probe_deadline = now() - interval '1 second',
           cooldown_ms = 1000, next_probe_at = null where endpoint = 'hangs'`,
      );
      const again = await startTestService(db, {
        notify: {
          webhook: {
            circuit: { failure_threshold: 3, cooldown: '200ms', cooldown_max: '10s' },
            endpoints: [{ name: 'hangs', url: `${rx.url}/h`, secret: SECRET, topics: ['*'], timeout: '500ms' }],
          },
        },
      });
      try {
        const row = await waitFor(async () => {
          const r = await db.pool.query<{ circuit: string; cooldown_ms: number; probe_job_id: string | null }>(
            `select circuit, cooldown_ms, probe_job_id from endpoint_state where endpoint = 'hangs'`,
          );
          return r.rows[0]!.circuit === 'open' ? r.rows[0]! : null;
        });
        expect(row.cooldown_ms).toBe(2000);
        expect(row.probe_job_id).toBeNull();
        // The line is written once the sweep's transaction committed, so it may come just after the row is seen.
        await waitFor(() => again.lines.some((l) => l.event === 'endpoint.circuit_opened' && l.reason === 'probe_deadline') || null);
      } finally {
        await again.svc.stop();
      }
    } finally {
      await svc.stop();
      await rx.close();
    }
  }, 60_000);

  it('a closed endpoint that only succeeds writes nothing to its state row', async () => {
    const rx = await startReceiver();
    const { svc } = await startTestService(db, {
      notify: { webhook: { endpoints: [{ name: 'quiet', url: `${rx.url}/q`, secret: SECRET, topics: ['*'] }] } },
    });
    try {
      const before = await db.pool.query<{ updated_at: Date }>(`select updated_at from endpoint_state where endpoint = 'quiet'`);
      await enqueueJobs(db.pool, deliveries('quiet', 50), svc.channels.jobs);
      await waitFor(async () => ((await counts('quiet')).completed === 50 ? true : null));
      await svc.stop();
      const after = await db.pool.query<{ updated_at: Date }>(`select updated_at from endpoint_state where endpoint = 'quiet'`);
      expect(after.rows[0]!.updated_at.getTime()).toBe(before.rows[0]!.updated_at.getTime());
    } finally {
      await svc.stop();
      await rx.close();
    }
  });

  it('max age: a job held by a pause past notify.webhook.max_age goes dead once, with one notification per endpoint per sweep', async () => {
    const rx = await startReceiver();
    const api = await startApi(db, {
      notify: {
        webhook: {
          circuit: { cooldown: '100ms', cooldown_max: '1s' },
          max_age: '5s',
          endpoints: [{ name: 'aged', url: `${rx.url}/aged`, secret: SECRET, topics: ['*'] }],
        },
      },
    });
    const admin = await makeUser(db.pool, 'age-admin', 'admin');
    try {
      expect((await call(api.url, 'POST', '/v1/endpoints/aged/pause', { token: admin })).status).toBe(200);
      const ids = await enqueueJobs(db.pool, deliveries('aged', 3), api.svc.channels.jobs);
      // Held for longer than max_age: their series started a minute ago.
      await db.pool.query(`update jobs set series_started_at = now() - interval '1 minute' where id = any($1::uuid[])`, [ids]);
      const dead = await waitFor(async () => {
        const r = await db.pool.query<{ status: string; last_error: string }>(
          `select status, last_error from jobs where id = any($1::uuid[])`,
          [ids],
        );
        return r.rows.every((x) => x.status === 'dead') ? r.rows : null;
      }, 20_000);
      expect(dead.map((r) => r.last_error)).toEqual(['endpoint unavailable', 'endpoint unavailable', 'endpoint unavailable']);
      const alerts = await db.pool.query<{ details: { count: number } }>(
        `select details from audit_log where action = 'endpoint.expired' and target_id = 'aged'`,
      );
      expect(alerts.rows.map((r) => r.details.count)).toEqual([3]);
      // This endpoint's: jobs that earlier tests in this file left held (a paused endpoint) can expire
      // in the same sweeps, and every admin is told of those too.
      const notes = await db.pool.query(
        `select 1 from notifications n join users u on u.id = n.user_id
         where u.name = 'age-admin' and n.topic = 'endpoint.expired' and n.data->>'endpoint' = 'aged'`,
      );
      expect(notes.rowCount).toBe(1);
      expect(rx.requests).toHaveLength(0);
    } finally {
      await api.close();
      await rx.close();
    }
  }, 40_000);
});
