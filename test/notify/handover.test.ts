import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Endpoint } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { ListenHub } from '../../src/db/listen-hub.js';
import { withTransaction } from '../../src/db/pool.js';
import { fanOut, type FanOutContext, type EventRow } from '../../src/notify/fan-out.js';
import { OutboxPump } from '../../src/notify/outbox-pump.js';
import { handoverTransaction } from '../../src/queue/handover.js';
import { eventBody, webhookJobId, WEBHOOK_JOB } from '../../src/webhook/job.js';
import { notifyMany } from '../../src/outbox.js';
import { WorkerPool, type JobHandler, type WorkerPoolOptions } from '../../src/queue/worker.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

/**
 * Claim on dispatch: jobs the dispatching process's pool has room for are inserted as running
 * under its worker id and handed over after commit, without a claim or a NOTIFY.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, endpoint_state');
});
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).toReversed()) await s();
});

const JOBS_CH = 'public.acw_jobs';
const endpoint = (name: string, cap: number): Endpoint =>
  ({
    name,
    url: 'http://127.0.0.1:1/',
    secret: 'x'.repeat(32),
    topics: ['order.*'],
    enabled: true,
    max_in_flight: cap,
    timeout: 1_000,
    headers: {},
    scheme: 'acw',
  }) as unknown as Endpoint;

async function startPool(
  handler: JobHandler,
  opts: { concurrency?: number; caps?: Map<string, number>; onFinished?: WorkerPoolOptions['onFinished'] } = {},
): Promise<WorkerPool> {
  const wp = new WorkerPool({
    pool: db.pool,
    url: db.url,
    channel: JOBS_CH,
    handlers: { [WEBHOOK_JOB]: handler },
    concurrency: opts.concurrency ?? 8,
    leaseMs: 30_000,
    pollMs: 60_000,
    shutdownGraceMs: 500,
    retry: { base: 20, max: 200, jitter: 0 },
    endpointLimits: () => opts.caps ?? new Map([['a', 100]]),
    ...(opts.onFinished ? { onFinished: opts.onFinished } : {}),
  });
  await wp.start();
  stops.push(() => wp.stop());
  // The pool's first claim runs at start; while a claim is in flight no slot is handed over.
  await waitFor(() => !wp.claiming, 5_000);
  return wp;
}

function context(endpoints: Endpoint[], pool: WorkerPool | null): FanOutContext {
  return {
    endpoints: () => endpoints,
    webhooksEnabled: () => true,
    maxAttempts: 3,
    jobsChannel: JOBS_CH,
    log: silentLogger,
    adopter: () => pool,
  };
}

async function insertEvents(n: number): Promise<EventRow[]> {
  const res = await db.pool.query<EventRow>(
    `insert into events (topic, data) select 'order.paid', jsonb_build_object('n', g) from generate_series(1, $1) g
     returning id, topic, data, recipients, created_at`,
    [n],
  );
  return res.rows;
}

/**
 * Counts NOTIFYs on the jobs channel. `fence()` sends one of its own and resolves, once it
 * arrives, with the payloads that came before it: PostgreSQL delivers notifications in commit
 * order, so anything committed earlier has arrived by then (no sleep needed to say "none came").
 */
async function listenJobs(): Promise<{ count: () => number; fence: () => Promise<string[]> }> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  const payloads: string[] = [];
  c.on('notification', (m) => payloads.push(m.payload ?? ''));
  await c.query(`listen "${JOBS_CH}"`);
  stops.push(() => c.end());
  return {
    count: () => payloads.filter((p) => !p.startsWith('fence-')).length,
    fence: async () => {
      const mark = `fence-${Math.random().toString(36).slice(2)}`;
      await db.pool.query('select pg_notify($1, $2)', [JOBS_CH, mark]);
      await waitFor(() => payloads.includes(mark), 5_000);
      return payloads.slice(0, payloads.indexOf(mark)).filter((p) => !p.startsWith('fence-'));
    },
  };
}

const rows = async () =>
  (
    await db.pool.query<{ status: string; locked_by: string | null; attempts: number; endpoint: string }>(
      'select status, locked_by, attempts, endpoint from jobs order by endpoint',
    )
  ).rows;

describe('claim on dispatch', () => {
  it('inserts the jobs the pool has room for as running under its worker id, runs them, and sends no NOTIFY', async () => {
    const release: Array<() => void> = [];
    const pool = await startPool(() => new Promise<void>((r) => release.push(r)));
    const notes = await listenJobs();
    const ctx = context([endpoint('a', 100)], pool);
    const evs = await insertEvents(3);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    // Handed over at commit: running in this pool before any claim could have happened.
    expect(pool.inFlight).toBe(3);
    const r = await rows();
    expect(r.map((x) => [x.status, x.locked_by, x.attempts])).toEqual(Array.from({ length: 3 }, () => ['running', pool.workerId, 1]));
    expect(await notes.fence()).toEqual([]);
    release.forEach((f) => f());
    await waitFor(async () => (await rows()).every((x) => x.status === 'completed'), 5_000);
  });

  it('hands a job over with its event as a claim reads it: the first attempt and a retry after a claim send the same body', async () => {
    const bodies: string[] = [];
    const pool = await startPool(async (job) => {
      expect(job.payload).toEqual({ topic: 'order.paid' });
      bodies.push(eventBody(job.eventId!, 'order.paid', job.event!));
      if (bodies.length === 1) throw new Error('first attempt fails');
    });
    const ctx = context([endpoint('a', 100)], pool);
    // The data as a request gives it, keys in the producer's order; stored, jsonb reorders them.
    const data = { order_id: 'o1', b: { z: 1, y: 2 }, '10': 'ten', '9': 'nine', amount: 5 };
    const row = (
      await db.pool.query<EventRow>(
        `insert into events (topic, data) values ('order.paid', $1::jsonb) returning id, topic, recipients, created_at`,
        [JSON.stringify(data)],
      )
    ).rows[0]!;
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) =>
      fanOut(client, [{ ...row, data }], ctx, { handover }),
    );
    await waitFor(async () => (await rows()).every((x) => x.status === 'completed'), 5_000);
    expect(bodies).toHaveLength(2);
    expect(bodies[1]).toBe(bodies[0]);
    expect(JSON.parse(bodies[0]!).data).toEqual(data);
    expect(bodies[0]).toContain('"data":{"9":"nine","10":"ten","b":{"y":2,"z":1},"amount":5,"order_id":"o1"}');
  });

  it('obeys the state row over the pool: a paused endpoint, or one whose circuit is open, gets its jobs pending, and the slots come back', async () => {
    // This pool has no endpoint gate, like a process whose cache has not yet seen the pause: the
    // insert itself must hold the jobs, as the claim does.
    const ran: string[] = [];
    const pool = await startPool(
      async (job) => {
        ran.push(job.endpoint ?? '');
      },
      { caps: new Map(['a', 'b', 'c'].map((e) => [e, 100])) },
    );
    await db.pool.query(`insert into endpoint_state (endpoint, paused, paused_at) values ('a', true, now())`);
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, opened_at, next_probe_at) values ('b', 'open', now(), now() + interval '1 hour')`,
    );
    const ctx = context([endpoint('a', 100), endpoint('b', 100), endpoint('c', 100)], pool);
    const evs = await insertEvents(2);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    const r = await rows();
    expect(r.filter((x) => x.endpoint !== 'c').map((x) => [x.endpoint, x.status, x.locked_by, x.attempts])).toEqual([
      ['a', 'pending', null, 0],
      ['a', 'pending', null, 0],
      ['b', 'pending', null, 0],
      ['b', 'pending', null, 0],
    ]);
    await waitFor(async () => (await rows()).filter((x) => x.endpoint === 'c').every((x) => x.status === 'completed'), 5_000);
    expect(ran).toEqual(['c', 'c']);
    // Every slot came back: a later dispatch of as many jobs as the pool has slots (8) is handed
    // over whole, none of it pending (4 slots kept for the held jobs would leave 4 pending).
    const more = await insertEvents(8);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) =>
      fanOut(client, more, { ...ctx, endpoints: () => [endpoint('c', 100)] }, { handover }),
    );
    expect((await rows()).filter((x) => x.endpoint === 'c' && x.status === 'pending')).toEqual([]);
    await waitFor(() => ran.length === 10, 5_000);
  });

  it('respects the pool size and each endpoint cap: the rest go in pending and are claimed as usual', async () => {
    const release: Array<() => void> = [];
    const caps = new Map([
      ['a', 2],
      ['b', 10],
    ]);
    // Counted in the handler itself: every moment, not samples of the table.
    const a = { now: 0, max: 0 };
    const pool = await startPool(
      async (job) => {
        const isA = job.endpoint === 'a';
        if (isA) a.max = Math.max(a.max, ++a.now);
        await new Promise<void>((r) => release.push(r));
        if (isA) a.now--;
      },
      { concurrency: 5, caps },
    );
    const notes = await listenJobs();
    const ctx = context([endpoint('a', 2), endpoint('b', 10)], pool);
    const evs = await insertEvents(4); // 8 jobs: 4 for a, 4 for b
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    const r = await rows();
    const running = r.filter((x) => x.status === 'running');
    expect(running.length).toBe(5);
    expect(running.filter((x) => x.endpoint === 'a').length).toBe(2);
    expect(r.filter((x) => x.status === 'pending').length).toBe(3);
    await waitFor(() => notes.count() === 1, 2_000);
    // Finishing everything lets the pool claim the pending ones; never more than 2 of a at once.
    await waitFor(async () => {
      release.splice(0).forEach((f) => f());
      return (await rows()).every((x) => x.status === 'completed');
    }, 10_000);
    expect(a.max).toBe(2);
  });

  it('a rolled-back dispatch writes nothing and gives every reserved slot back', async () => {
    const release: Array<() => void> = [];
    const pool = await startPool(() => new Promise<void>((r) => release.push(r)), { concurrency: 4 });
    const ctx = context([endpoint('a', 100)], pool);
    const evs = await insertEvents(4);
    await expect(
      handoverTransaction(db.pool, ctx.adopter?.() ?? null, async (client, handover) => {
        await fanOut(client, evs, ctx, { handover });
        throw new Error('boom after the insert');
      }),
    ).rejects.toThrow('boom');
    expect(await rows()).toEqual([]);
    expect(pool.inFlight).toBe(0);
    // All four slots are free again. (Had they leaked, the pool would see no free slot and take
    // nothing.) The retry's jobs reach the pool, handed over or, if the claim loop that the
    // returned slots woke is still running, inserted pending and claimed.
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    await waitFor(() => pool.inFlight === 4, 5_000);
    expect((await rows()).map((x) => x.status)).toEqual(['running', 'running', 'running', 'running']);
    release.forEach((f) => f());
  });

  it('after stop() began, a committed handover is handed back pending with the attempt unspent', async () => {
    const pool = await startPool(async () => undefined);
    const ctx = context([endpoint('a', 100)], pool);
    const evs = await insertEvents(2);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, async (client, handover) => {
      const out = await fanOut(client, evs, ctx, { handover });
      // The stop lands between the insert and the commit.
      void pool.stop();
      return out;
    });
    const r = await rows();
    expect(r.map((x) => [x.status, x.attempts, x.locked_by])).toEqual([
      ['pending', 0, null],
      ['pending', 0, null],
    ]);
  });

  it('the outbox path: events committed by an application are delivered by the pool of the dispatching process', async () => {
    const seen: string[] = [];
    const pool = await startPool(async (job) => void seen.push(job.id), { concurrency: 16 });
    const ctx = context([endpoint('a', 100)], pool);
    const hub = new ListenHub({ url: db.url });
    stops.push(() => hub.close());
    const d = new OutboxPump({ pool: db.pool, listenHub: hub, channel: 'public.acw_events', pollMs: 60_000, ctx, log: silentLogger });
    await d.start();
    stops.push(() => d.stop());
    const c = await db.pool.connect();
    try {
      await c.query('begin');
      await notifyMany(
        c,
        Array.from({ length: 40 }, (_, i) => ({ topic: 'order.paid', data: { i } })),
      );
      await c.query('commit');
    } finally {
      c.release();
    }
    await waitFor(async () => (await rows()).filter((x) => x.status === 'completed').length === 40, 5_000);
    expect(new Set(seen).size).toBe(40);
    const undispatched = await db.pool.query('select count(*)::int as n from events where dispatched_at is null');
    expect(undispatched.rows[0].n).toBe(0);
  });
});

const show = async (c: pg.ClientBase) =>
  (await c.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit;

describe('redoable dispatch', () => {
  it('job ids are version 8 UUIDs of event and endpoint, led by the event time: a redone dispatch makes the same jobs', async () => {
    const ctx = context([endpoint('a', 100), endpoint('b', 100)], null);
    const evs = await insertEvents(2);
    const first = await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    const ids = first.flatMap((r) => r.job_ids);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The event's 48 bits of milliseconds come first, so a day's jobs sort together.
    for (const [i, r] of first.entries()) for (const id of r.job_ids) expect(id.slice(0, 13)).toBe(evs[i]!.id.slice(0, 13));
    expect(first[0]!.job_ids).toEqual([webhookJobId(evs[0]!.id, 'a'), webhookJobId(evs[0]!.id, 'b')]);
    // What a database crash that lost the (asynchronous) dispatch commit leaves behind.
    await db.pool.query('truncate job_queue, job_history');
    await db.pool.query('update events set dispatched_at = null');
    const again = await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    expect(again.flatMap((r) => r.job_ids)).toEqual(ids);
    const stored = await db.pool.query<{ id: string }>('select id from jobs');
    expect(stored.rows.map((r) => r.id).toSorted()).toEqual(ids.toSorted());
  });

  it('asyncCommit turns synchronous_commit off for that transaction only', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      expect(await withTransaction(pool, show, { asyncCommit: true })).toBe('off');
      expect(await withTransaction(pool, show)).toBe('on');
      const c = await pool.connect();
      try {
        expect(await show(c)).toBe('on');
      } finally {
        c.release();
      }
    } finally {
      await pool.end();
    }
  });
});

describe('the same job id again', () => {
  it('a redone dispatch of a job still running here: the older run loses its lease, the newer one completes, no slot leaks', async () => {
    const release: Array<() => void> = [];
    const signals: AbortSignal[] = [];
    const caps = new Map([['a', 2]]);
    /** Whether each outcome write changed the row, in the order written. */
    const written: boolean[] = [];
    const pool = await startPool(
      (_job, { signal }) => {
        signals.push(signal);
        return new Promise<void>((r) => release.push(r));
      },
      { caps, onFinished: (_f, changed) => void written.push(changed) },
    );
    const ctx = context([endpoint('a', 2)], pool);
    const evs = await insertEvents(1);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    expect(pool.inFlight).toBe(1);
    // A database crash lost the asynchronous dispatch commit; the dispatcher redoes it.
    await db.pool.query('delete from jobs');
    await db.pool.query('update events set dispatched_at = null');
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    // Both runs hold a slot until they end; the older one was told its lease is gone.
    expect(pool.inFlight).toBe(2);
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[1]!.aborted).toBe(false);
    release.shift()!(); // the older run ends: its guarded write changes nothing
    await waitFor(() => written.length === 1, 5_000);
    expect(written).toEqual([false]);
    expect((await rows())[0]!.status).toBe('running');
    release.shift()!();
    await waitFor(async () => (await rows())[0]!.status === 'completed', 5_000);
    await waitFor(() => pool.inFlight === 0, 5_000);
    // Both of the endpoint's two slots are free again.
    expect(pool.reserve(WEBHOOK_JOB, 'a')).toBe(true);
    expect(pool.reserve(WEBHOOK_JOB, 'a')).toBe(true);
    expect(pool.reserve(WEBHOOK_JOB, 'a')).toBe(false);
    pool.unreserve(['a', 'a']);
  });

  it('an event dispatched again while its jobs exist neither fails the batch nor touches those jobs', async () => {
    const ctx = context([endpoint('a', 100)], null);
    const evs = await insertEvents(2);
    const first = await handoverTransaction(db.pool, ctx.adopter?.() ?? null, (client, handover) => fanOut(client, evs, ctx, { handover }));
    // Their jobs are live (a dispatch and its jobs commit together, so a redone dispatch meets them
    // live or not at all); one of them is being delivered.
    await db.pool.query(`update job_queue set status = 'running', attempts = 1 where id = $1`, [first[0]!.job_ids[0]]);
    await db.pool.query('update events set dispatched_at = null');
    // Never started, so it never subscribes.
    const d = new OutboxPump({
      pool: db.pool,
      listenHub: new ListenHub({ url: db.url }),
      channel: 'public.acw_events',
      pollMs: 60_000,
      ctx,
      log: silentLogger,
    });
    expect(await d.pumpBatch()).toBe(2);
    const r = await db.pool.query<{ id: string; status: string; attempts: number }>('select id, status, attempts from jobs order by id');
    expect(r.rows.map((x) => x.id)).toEqual(first.flatMap((x) => x.job_ids).toSorted());
    expect(r.rows.filter((x) => x.status === 'running')).toEqual([{ id: first[0]!.job_ids[0], status: 'running', attempts: 1 }]);
    expect(r.rows.filter((x) => x.status === 'pending')).toHaveLength(1);
    const left = await db.pool.query('select count(*)::int as n from events where dispatched_at is null');
    expect(left.rows[0].n).toBe(0);
  });

  it('a handed-over lease runs from the insert, not from the start of a long transaction', async () => {
    const release: Array<() => void> = [];
    const pool = await startPool(() => new Promise<void>((r) => release.push(r)));
    const ctx = context([endpoint('a', 100)], pool);
    const evs = await insertEvents(1);
    await handoverTransaction(db.pool, ctx.adopter?.() ?? null, async (client, handover) => {
      await client.query('select pg_sleep(1)');
      return fanOut(client, evs, ctx, { handover });
    });
    const r = await db.pool.query<{ ms: number }>(`select extract(epoch from (lease_expires_at - created_at)) * 1000 as ms from jobs`);
    // created_at is the transaction's start; the 30 s lease began a second later.
    expect(Number(r.rows[0]!.ms)).toBeGreaterThanOrEqual(30_000 + 900);
    release.forEach((f) => f());
  });
});
