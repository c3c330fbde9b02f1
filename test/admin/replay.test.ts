import { getJob } from '../../src/admin/jobs.js';
// Replay of an endpoint's window (src/admin/replay.ts) called directly against PostgreSQL, without a
// service or a receiver: the request's every check, the window's edges, which jobs are reset and
// which created (whitelist, paging), the purge retention cut, dry runs, the audit row, the log line
// and idempotency keys. test/http/replay.test.ts covers the same through HTTP with real deliveries.
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseReplayRequest, replayEndpoint, type ReplayContext, type ReplayRequest } from '../../src/admin/replay.js';
import { parseConfig, resolveEndpoints } from '../../src/config/index.js';
import { ApiError } from '../../src/errors.js';
import { buildBody, webhookJobId, webhookJobIdV5 } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';
import { refusal } from '../helpers/refusal.js';

const NOW = Date.parse('2026-06-01T12:00:00.000Z');
const H = 3_600_000;
const JOBS_CHANNEL = 'test_replay_jobs';
const TIME_OR_DURATION = 'expected an RFC 3339 time like "2026-12-01T02:00:00Z" or a duration like "2h"';

/** A promise to wait on, and what settles it. */
function signal(): { fired: Promise<void>; fire: () => void } {
  const s = { fired: Promise.resolve(), fire: (): void => undefined };
  s.fired = new Promise<void>((resolve) => (s.fire = resolve));
  return s;
}

describe('parseReplayRequest', () => {
  it.each([
    ['2026-05-01T00:00:00Z', '2026-05-01T00:00:00.000Z'],
    ['2026-05-01t00:00:00z', '2026-05-01T00:00:00.000Z'],
    ['2026-05-01 00:00:00Z', '2026-05-01T00:00:00.000Z'],
    ['2026-05-01T02:00+02:00', '2026-05-01T00:00:00.000Z'],
    ['2026-05-01T00:00:00.250-01:30', '2026-05-01T01:30:00.250Z'],
    ['90m', '2026-06-01T10:30:00.000Z'],
    ['1h30m', '2026-06-01T10:30:00.000Z'],
  ])('reads since %s as %s', (since, iso) => {
    expect(parseReplayRequest({ since }, NOW).since.toISOString()).toBe(iso);
  });

  it('defaults: until now, status dead, no dry run, no key', () => {
    const p = parseReplayRequest({ since: '2h' }, NOW);
    expect(p).toEqual({
      since: new Date(NOW - 2 * H),
      until: new Date(NOW),
      status: 'dead',
      dryRun: false,
      key: undefined,
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(parseReplayRequest({ since: '2h', until: '1h', status: 'all', dry_run: true, idempotency_key: 'k' }, NOW)).toMatchObject({
      until: new Date(NOW - H),
      status: 'all',
      dryRun: true,
      key: 'k',
    });
    expect(parseReplayRequest({ since: '2h', dry_run: false }, NOW).dryRun).toBe(false);
  });

  it.each([
    [{ since: 7 }, 'since'],
    [{ since: '' }, 'since'],
    [{ since: `${'1'.repeat(63)}h` }, 'since'],
    [{ since: 'yesterday' }, 'since'],
    // Of the RFC 3339 form, but no date.
    [{ since: '2026-13-01T00:00:00Z' }, 'since'],
    // No offset: a local time is ambiguous.
    [{ since: '2026-05-01T00:00:00' }, 'since'],
    [{ since: ' 2026-05-01T00:00:00Z' }, 'since'],
    [{ since: '2026-05-01T00:00:00Zx' }, 'since'],
    // Beyond any date (and PostgreSQL's), or before year 1.
    [{ since: '99999999999h' }, 'since'],
    [{ since: '18000000h' }, 'since'],
    // 0000-06-30: year 0.
    [{ since: '17758860h' }, 'since'],
    // 65 characters, though a duration.
    [{ since: `${'0'.repeat(63)}1h` }, 'since'],
    [{ since: '2h', until: 'later' }, 'until'],
  ])('refuses %j naming %s', (req, field) => {
    const err = refusal(() => parseReplayRequest(req as unknown as ReplayRequest, NOW));
    expect([err.status, err.code, err.message, err.details]).toEqual([400, 'invalid_input', `${field}: ${TIME_OR_DURATION}`, { field }]);
  });

  it('accepts a duration reaching back into the first centuries, and a 64-character value', () => {
    expect(parseReplayRequest({ since: '17000000h' }, NOW).since.getUTCFullYear()).toBe(87);
    expect(parseReplayRequest({ since: '17750076h' }, NOW).since.toISOString()).toBe('0001-07-01T00:00:00.000Z');
    expect(parseReplayRequest({ since: `${'0'.repeat(62)}1h` }, NOW).since.getTime()).toBe(NOW - H);
  });

  it('refuses a window that is empty or reversed, with both ends', () => {
    const same = refusal(() => parseReplayRequest({ since: '2026-05-01T00:00:00Z', until: '2026-05-01T00:00:00Z' }, NOW));
    expect([same.message, same.details]).toEqual([
      'since: must be earlier than until (2026-05-01T00:00:00.000Z), got 2026-05-01T00:00:00.000Z',
      { field: 'since' },
    ]);
    expect(refusal(() => parseReplayRequest({ since: '1h', until: '2h' }, NOW)).message).toBe(
      `since: must be earlier than until (${new Date(NOW - 2 * H).toISOString()}), got ${new Date(NOW - H).toISOString()}`,
    );
    expect(parseReplayRequest({ since: '2026-05-01T00:00:00Z', until: '2026-05-01T00:00:00.001Z' }, NOW).until.getTime()).toBe(
      Date.parse('2026-05-01T00:00:00.001Z'),
    );
  });

  it.each([
    [{ status: 'completed' }, 'status', 'status: expected "dead" or "all", got "completed"'],
    [{ status: 'x'.repeat(50) }, 'status', `status: expected "dead" or "all", got "${'x'.repeat(40)}"`],
    [{ status: 5 }, 'status', 'status: expected "dead" or "all", got "5"'],
    [{ dry_run: 'yes' }, 'dry_run', 'dry_run: expected true or false'],
    [{ idempotency_key: '' }, 'idempotency_key', 'idempotency_key: expected 1-200 printable characters'],
    [{ idempotency_key: 'k'.repeat(201) }, 'idempotency_key', 'idempotency_key: expected 1-200 printable characters'],
    [{ idempotency_key: 'a\u0000b' }, 'idempotency_key', 'idempotency_key: expected 1-200 printable characters'],
    [{ idempotency_key: 42 }, 'idempotency_key', 'idempotency_key: expected 1-200 printable characters'],
  ])('refuses %j naming %s', (over, field, message) => {
    const err = refusal(() => parseReplayRequest({ since: '1h', ...over } as unknown as ReplayRequest, NOW));
    expect([err.status, err.message, err.details]).toEqual([400, message, { field }]);
  });

  it('accepts a key of 200 printable characters', () => {
    expect(parseReplayRequest({ since: '1h', idempotency_key: 'k'.repeat(200) }, NOW).key).toHaveLength(200);
  });

  it('hashes the request as given: relative times unresolved, every field that changes the replay', () => {
    const hash = (r: ReplayRequest, now = NOW) => parseReplayRequest(r, now).hash;
    expect(hash({ since: '1h' }, NOW + 5 * H)).toBe(hash({ since: '1h' }));
    expect(hash({ since: '1h', status: 'dead' })).toBe(hash({ since: '1h' }));
    expect(hash({ since: '1h', dry_run: true, idempotency_key: 'k' })).toBe(hash({ since: '1h' }));
    const others = [hash({ since: '2h' }), hash({ since: '1h', until: '30m' }), hash({ since: '1h', status: 'all' })];
    expect(new Set([hash({ since: '1h' }), ...others]).size).toBe(4);
  });
});

let db: TestDatabase;
let listener: pg.Client;
let wakeUps = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel === JOBS_CHANNEL) wakeUps++;
  });
  await listener.query(`listen ${JOBS_CHANNEL}`);
});
afterAll(async () => {
  await listener.end();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, audit_log cascade',
  );
  wakeUps = 0;
});

const ENDPOINTS = [
  { name: 'crm', url: 'https://crm.example.com/h', secret: 's', topics: ['crm.*', 'billing.paid', 'a_b.*'] },
  { name: 'all', url: 'https://all.example.com/h', secret: 's', topics: ['*'] },
];

function context(purge: Record<string, string | boolean> = { enabled: false }) {
  const config = parseConfig({ jobs: { job_purge: purge }, notify: { webhook: { endpoints: ENDPOINTS } } });
  const logs = captureLogs();
  const ctx: ReplayContext = {
    pool: db.pool,
    endpoints: resolveEndpoints(config),
    purge: config.jobs.job_purge,
    maxAttempts: 7,
    jobsChannel: JOBS_CHANNEL,
    log: logs.log,
  };
  return { ctx, logs };
}

/** A job of `endpoint` made `agoMs` before the database's now. */
async function job(status: string, agoMs: number, endpoint = 'crm'): Promise<string> {
  const res = await db.pool.query<{ id: string }>(
    `insert into jobs (type, payload, status, attempts, max_attempts, endpoint, created_at, completed_at)
     values ('webhook.deliver', '{"topic":"crm.x","body":"{}"}', $1, 3, 3, $2, now() - $3 * interval '1 millisecond',
       case when $1 in ('completed', 'dead') then now() end)
     returning id`,
    [status, endpoint, agoMs],
  );
  return res.rows[0]!.id;
}

/** A dispatched event (or not) made `agoMs` before the database's now. */
async function event(topic: string, agoMs: number, dispatched = true): Promise<string> {
  const res = await db.pool.query<{ id: string }>(
    `insert into events (topic, data, dispatched_at, created_at)
     values ($1, '{"n":1}', case when $3 then now() end, now() - $2 * interval '1 millisecond') returning id`,
    [topic, agoMs, dispatched],
  );
  return res.rows[0]!.id;
}

const statusOf = async (id: string) =>
  (await db.pool.query<{ status: string }>(`select status from jobs where id = $1`, [id])).rows[0]?.status;

describe('replayEndpoint', () => {
  it('resets the dead jobs of the window, counts the others by status, wakes the workers, audits and logs', async () => {
    const { ctx, logs } = context();
    const dead = [await job('dead', 10 * 60_000), await job('dead', 20 * 60_000)];
    const done = await job('completed', 10 * 60_000);
    await job('pending', 10 * 60_000);
    await job('cancelled', 10 * 60_000);
    const outside = await job('dead', 3 * H);
    const otherEndpoint = await job('dead', 10 * 60_000, 'all');
    const answer = await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops');
    expect(answer).toMatchObject({
      endpoint: 'crm',
      status: 'dead',
      reset: 2,
      created: 0,
      unchanged: { completed: 1, pending: 1, cancelled: 1 },
      retention_limited: false,
    });
    expect(Object.keys(answer)).toEqual(['endpoint', 'status', 'window', 'reset', 'created', 'unchanged', 'retention_limited']);
    for (const id of dead) expect(await statusOf(id)).toBe('pending');
    expect([await statusOf(done), await statusOf(outside), await statusOf(otherEndpoint)]).toEqual(['completed', 'dead', 'dead']);
    await waitFor(() => wakeUps === 1);
    const audit = await db.pool.query(`select action, actor, target_type, target_id, details from audit_log`);
    expect(audit.rows).toEqual([
      {
        action: 'endpoint.replay',
        actor: 'ops',
        target_type: 'endpoint',
        target_id: 'crm',
        details: { endpoint: 'crm', window: answer.window, status: 'dead', reset: 2, created: 0, retention_limited: false },
      },
    ]);
    expect(logs.events('endpoint.replay')).toEqual([
      expect.objectContaining({
        level: 30,
        endpoint: 'crm',
        actor: 'ops',
        status: 'dead',
        since: answer.window.since,
        until: answer.window.until,
        reset: 2,
        created: 0,
        msg: 'replayed 2 jobs of endpoint crm',
      }),
    ]);
  });

  it('logs what it reset and created together, and needs no logger', async () => {
    const { ctx, logs } = context();
    await job('dead', 60_000);
    await event('crm.x', 60_000);
    expect(await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops')).toMatchObject({ reset: 1, created: 1 });
    expect(logs.events('endpoint.replay').map((l) => l.msg)).toEqual(['replayed 2 jobs of endpoint crm']);
    const { log: _none, ...quiet } = ctx;
    await job('dead', 60_000);
    expect(await replayEndpoint(quiet, 'crm', { since: '1h' }, 'ops')).toMatchObject({ reset: 1, created: 0 });
  });

  it('status all resets completed jobs too', async () => {
    const { ctx } = context();
    const done = await job('completed', 60_000);
    const dead = await job('dead', 60_000);
    const running = await job('running', 60_000);
    const answer = await replayEndpoint(ctx, 'crm', { since: '1h', status: 'all' }, 'ops');
    expect(answer).toMatchObject({ status: 'all', reset: 2, unchanged: { running: 1 } });
    expect([await statusOf(done), await statusOf(dead), await statusOf(running)]).toEqual(['pending', 'pending', 'running']);
  });

  it('takes jobs made at since and not those made at until', async () => {
    const { ctx } = context();
    const edge = await job('dead', H);
    const at = (await db.pool.query<{ t: Date }>(`select created_at as t from jobs where id = $1`, [edge])).rows[0]!.t;
    const first = await replayEndpoint(ctx, 'crm', { since: new Date(at.getTime() - 1).toISOString(), until: at.toISOString() }, 'ops');
    expect(first.reset).toBe(0);
    const second = await replayEndpoint(ctx, 'crm', { since: at.toISOString(), until: new Date(at.getTime() + 1).toISOString() }, 'ops');
    expect(second.reset).toBe(1);
    expect(await statusOf(edge)).toBe('pending');
  });

  it('wakes no worker when nothing was reset', async () => {
    const { ctx } = context();
    await job('dead', 3 * H);
    expect((await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops')).reset).toBe(0);
    await replayEndpoint(ctx, 'all', { since: '1h' }, 'ops');
    // A later reset's wake-up arrives; none came before it.
    await job('dead', 60_000);
    await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops');
    await waitFor(() => wakeUps > 0);
    expect(wakeUps).toBe(1);
  });

  it('refuses an unknown endpoint, writing nothing', async () => {
    const { ctx } = context();
    await expect(replayEndpoint(ctx, 'nope', { since: '1h' }, 'ops')).rejects.toMatchObject({
      status: 404,
      message: 'name: no endpoint named "nope"',
    });
    expect((await db.pool.query(`select 1 from audit_log`)).rowCount).toBe(0);
  });

  it('creates jobs for dispatched events of the window that match the whitelist and have none, as the fan-out would', async () => {
    const { ctx } = context();
    const paid = await event('billing.paid', 60_000);
    const crm = await event('crm.lead.new', 60_000);
    const underscore = await event('a_b.x', 60_000);
    await event('billing.pain', 60_000); // an exact topic is no prefix
    await event('axb.x', 60_000); // `_` is no wildcard
    await event('billing.refund', 60_000); // not in the whitelist
    await event('crm.other', 60_000, false); // not dispatched yet: the fan-out will make its job
    await event('crm.old', 3 * H); // before the window
    const had = await event('crm.had', 60_000);
    await db.pool.query(
      `insert into jobs (id, type, payload, status, endpoint, event_id) values ($1, 'webhook.deliver', '{}', 'completed', 'crm', $2)`,
      [webhookJobId(had, 'crm'), had],
    );
    const answer = await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops');
    expect(answer).toMatchObject({ reset: 0, created: 3, unchanged: { completed: 1 } });
    const made = await db.pool.query<{
      id: string;
      status: string;
      max_attempts: number;
      endpoint: string;
      event_id: string;
      payload: { topic: string; body: string };
    }>(`select id, status, max_attempts, endpoint, event_id, payload from jobs where event_id <> $1 order by id`, [had]);
    const want = [paid, crm, underscore].map((e) => webhookJobId(e, 'crm')).toSorted();
    expect(made.rows.map((r) => r.id)).toEqual(want);
    for (const r of made.rows) expect([r.status, r.max_attempts, r.endpoint]).toEqual(['pending', 7, 'crm']);
    const ev = (
      await db.pool.query<{ id: string; topic: string; data: unknown; created_at: Date }>(`select * from events where id = $1`, [paid])
    ).rows[0]!;
    const paidJob = made.rows.find((r) => r.event_id === paid)!;
    // Its event is in event_log: the job carries no body, and sends (and shows) the one made from the event.
    expect(paidJob.payload).toEqual({ topic: 'billing.paid' });
    expect((await getJob(db.pool, paidJob.id))!.payload).toEqual({
      topic: 'billing.paid',
      body: buildBody({ id: paid, topic: 'billing.paid', occurredAt: ev.created_at, data: ev.data }),
    });
    await waitFor(() => wakeUps > 0);
    // Nothing left to create.
    expect((await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops')).created).toBe(0);
  });

  it('gives a replayed delivery the trace context stored with its event (docs/operations.md#tracing)', async () => {
    const { ctx } = context();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const traced = await event('crm.traced', 60_000);
    await db.pool.query(`update event_log set traceparent = $2, tracestate = 'v=1' where id = $1`, [traced, tp]);
    await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops');
    const made = await db.pool.query(`select payload from jobs where id = $1`, [webhookJobId(traced, 'crm')]);
    expect(made.rows[0].payload).toMatchObject({ topic: 'crm.traced', traceparent: tp, tracestate: 'v=1' });
  });

  it('leaves an event alone whose job id was taken since the read (a replay running at once)', async () => {
    const { ctx } = context();
    const ev = await event('crm.x', 60_000);
    // The job the fan-out would make, not yet tied to its event: the read still finds the event without one.
    await db.pool.query(`insert into jobs (id, type, payload, status, endpoint) values ($1, 'webhook.deliver', '{}', 'completed', 'crm')`, [
      webhookJobId(ev, 'crm'),
    ]);
    expect(await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops')).toMatchObject({ created: 0 });
    expect(await statusOf(webhookJobId(ev, 'crm'))).toBe('completed');
  });

  it('a whitelist of "*" takes every topic, and pages through more events than one statement reads', async () => {
    const { ctx } = context();
    await db.pool.query(
      `insert into events (topic, data, dispatched_at, created_at)
       select 'bulk.t' || (g % 7), '{}', now(), now() - interval '10 minutes' - g * interval '1 millisecond' from generate_series(1, 1001) g`,
    );
    // Two events of the same instant: the page key is (created_at, id).
    await db.pool.query(
      `insert into events (topic, data, dispatched_at, created_at) select 'tie.x', '{}', now(), now() - interval '5 minutes' from generate_series(1, 2)`,
    );
    const dry = await replayEndpoint(ctx, 'all', { since: '1h', dry_run: true }, 'ops');
    expect(dry.created).toBe(1003);
    expect((await replayEndpoint(ctx, 'all', { since: '1h' }, 'ops')).created).toBe(1003);
    expect((await db.pool.query(`select count(*)::int as n from jobs where endpoint = 'all'`)).rows[0].n).toBe(1003);
  });

  it('pages through more events of one instant than one statement reads, each once (time kept to the microsecond)', async () => {
    const { ctx } = context();
    // One statement: one now(), so one created_at, with microseconds a JS Date does not keep.
    await db.pool.query(
      `insert into events (topic, data, dispatched_at, created_at)
       select 'bulk.x', '{}', now(), date_trunc('second', now()) - interval '5 minutes' + interval '123457 microseconds'
       from generate_series(1, 1001)`,
    );
    expect((await replayEndpoint(ctx, 'all', { since: '1h', dry_run: true }, 'ops')).created).toBe(1001);
    expect((await replayEndpoint(ctx, 'all', { since: '1h' }, 'ops')).created).toBe(1001);
  });

  it('a dry run counts only the events with no job for the endpoint, under the id made now or the older one', async () => {
    const { ctx } = context();
    await event('crm.none', 60_000);
    const now = await event('crm.now', 60_000);
    const older = await event('crm.older', 60_000);
    for (const [id, ev] of [
      [webhookJobId(now, 'crm'), now],
      [webhookJobIdV5(older, 'crm'), older],
    ] as const) {
      await db.pool.query(
        `insert into jobs (id, type, payload, status, endpoint, event_id) values ($1, 'webhook.deliver', '{}', 'completed', 'crm', $2)`,
        [id, ev],
      );
    }
    expect(await replayEndpoint(ctx, 'crm', { since: '1h', dry_run: true }, 'ops')).toMatchObject({ created: 1, dry_run: true });
    expect((await replayEndpoint(ctx, 'crm', { since: '1h' }, 'ops')).created).toBe(1);
  });

  it('a dry run counts what a replay would do, changes nothing, audits and logs nothing', async () => {
    const { ctx, logs } = context();
    const dead = await job('dead', 60_000);
    await event('crm.x', 60_000);
    const dry = await replayEndpoint(ctx, 'crm', { since: '1h', dry_run: true, idempotency_key: 'k' }, 'ops');
    expect(dry).toMatchObject({ reset: 1, created: 1, dry_run: true });
    expect(await statusOf(dead)).toBe('dead');
    expect((await db.pool.query(`select count(*)::int as n from jobs`)).rows[0].n).toBe(1);
    expect((await db.pool.query(`select 1 from audit_log`)).rowCount).toBe(0);
    expect(logs.events('endpoint.replay')).toEqual([]);
    // The key of a dry run is not kept: the real run with it is a first one.
    const real = await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'k' }, 'ops');
    expect(real).toMatchObject({ reset: 1, created: 1 });
    expect(real).not.toHaveProperty('dry_run');
    expect(real).not.toHaveProperty('repeated');
  });
});

describe('the purge retention', () => {
  it('cuts a window that begins before the shorter retention, and says where and why', async () => {
    const { ctx } = context({ enabled: true, completed_retention: '2h', dead_retention: '1h' });
    await job('dead', 90 * 60_000);
    const young = await job('dead', 30 * 60_000);
    const before = Date.now();
    const answer = await replayEndpoint(ctx, 'crm', { since: '3h' }, 'ops');
    const since = Date.parse(answer.window.since);
    expect(answer).toMatchObject({ retention_limited: true, reset: 1 });
    // An hour (the shorter retention) before the database's now.
    expect(since).toBeGreaterThanOrEqual(before - H - 5_000);
    expect(since).toBeLessThanOrEqual(Date.now() - H + 5_000);
    expect(Date.parse(answer.requested_since!)).toBeLessThan(since - H);
    expect(answer.note).toBe(
      `the window began before the purge retention (jobs.job_purge), where jobs may be deleted already: it starts at ${answer.window.since} instead; ` +
        'older dead jobs can still be re-queued with jobs redrive --endpoint crm',
    );
    expect(await statusOf(young)).toBe('pending');
    const audit = (await db.pool.query(`select details from audit_log`)).rows[0].details;
    expect(audit.retention_limited).toBe(true);
  });

  it('takes the completed retention when it is the shorter one', async () => {
    const { ctx } = context({ enabled: true, completed_retention: '1h', dead_retention: '2h' });
    await job('dead', 90 * 60_000);
    expect(await replayEndpoint(ctx, 'crm', { since: '3h', dry_run: true }, 'ops')).toMatchObject({ retention_limited: true, reset: 0 });
  });

  it('leaves a window inside the retention alone', async () => {
    const { ctx } = context({ enabled: true, completed_retention: '2h', dead_retention: '2h' });
    const answer = await replayEndpoint(ctx, 'crm', { since: '1h', dry_run: true }, 'ops');
    expect(answer.retention_limited).toBe(false);
    expect(answer).not.toHaveProperty('note');
    expect(answer).not.toHaveProperty('requested_since');
  });

  it('makes a window wholly past the retention empty, not reversed', async () => {
    const { ctx } = context({ enabled: true, completed_retention: '1h', dead_retention: '1h' });
    await job('dead', 4 * H);
    await event('crm.x', 4 * H);
    const answer = await replayEndpoint(ctx, 'crm', { since: '5h', until: '3h' }, 'ops');
    expect(answer).toMatchObject({ retention_limited: true, reset: 0, created: 0 });
    expect(answer.window.since).toBe(answer.window.until);
  });

  it('does not cut anything when the purge is off', async () => {
    const { ctx } = context({ enabled: false, completed_retention: '1h', dead_retention: '1h' });
    await job('dead', 4 * H);
    expect(await replayEndpoint(ctx, 'crm', { since: '5h' }, 'ops')).toMatchObject({ retention_limited: false, reset: 1 });
  });
});

describe('idempotency keys', () => {
  it('the same key and request again: the first answer, marked repeated, nothing written, nothing logged', async () => {
    const { ctx, logs } = context();
    await job('dead', 60_000);
    const first = await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'outage-1' }, 'ops');
    expect(first.reset).toBe(1);
    const audit = (await db.pool.query(`select details from audit_log`)).rows[0].details;
    expect(audit).toMatchObject({ idempotency_key: 'outage-1', request_hash: parseReplayRequest({ since: '1h' }).hash, answer: first });
    await job('dead', 60_000);
    const again = await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'outage-1' }, 'ops');
    expect(again).toEqual({ ...first, repeated: true });
    expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'dead'`)).rows[0].n).toBe(1);
    expect((await db.pool.query(`select 1 from audit_log`)).rowCount).toBe(1);
    expect(logs.events('endpoint.replay')).toHaveLength(1);
  });

  it('two requests with one key at once: one replays, the other waits for it and answers the same', async () => {
    const { ctx } = context();
    await job('dead', 60_000);
    await job('dead', 60_000);
    // The first request to look for an earlier answer holds its transaction open until the second
    // has looked too, or a second has passed: without the key's lock both would find none.
    const looked: number[] = [];
    const second = signal();
    let clients = 0;
    const pool = new Proxy(db.pool, {
      get(target, key) {
        if (key !== 'connect') return Reflect.get(target, key);
        return async () => {
          const client = await target.connect();
          const n = ++clients;
          // A view of the client, not a change to it: it goes back to the pool as it was.
          return new Proxy(client, {
            get(c, k) {
              if (k !== 'query') {
                const v: unknown = Reflect.get(c, k);
                return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(c) : v;
              }
              return async (text: string, values?: unknown[]) => {
                const res = await c.query(text, values);
                if (text.includes('from audit_log')) {
                  looked.push(n);
                  if (looked.length === 1) await Promise.race([second.fired, new Promise((r) => setTimeout(r, 1_000))]);
                  else second.fire();
                }
                return res;
              };
            },
          });
        };
      },
    }) as pg.Pool;
    const both = await Promise.all([
      replayEndpoint({ ...ctx, pool }, 'crm', { since: '1h', idempotency_key: 'twice' }, 'ops'),
      replayEndpoint({ ...ctx, pool }, 'crm', { since: '1h', idempotency_key: 'twice' }, 'ops'),
    ]);
    expect(looked).toHaveLength(2);
    expect(both.map((a) => a.repeated === true).toSorted()).toEqual([false, true]);
    expect(both.map((a) => a.reset)).toEqual([2, 2]);
    expect((await db.pool.query(`select 1 from audit_log`)).rowCount).toBe(1);
  });

  it('a dry run with a key used before counts afresh: it is not the earlier answer', async () => {
    const { ctx } = context();
    await job('dead', 60_000);
    await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'used' }, 'ops');
    await job('dead', 60_000);
    const dry = await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'used', dry_run: true }, 'ops');
    expect(dry).toMatchObject({ reset: 1, dry_run: true });
    expect(dry).not.toHaveProperty('repeated');
  });

  it('the same key with another request is a 409 naming the key', async () => {
    const { ctx } = context();
    await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'k1' }, 'ops');
    const err = await replayEndpoint(ctx, 'crm', { since: '2h', idempotency_key: 'k1' }, 'ops').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect([(err as ApiError).status, (err as ApiError).code, (err as ApiError).message, (err as ApiError).details]).toEqual([
      409,
      'idempotency_conflict',
      'idempotency_key: already used with a different request',
      { field: 'idempotency_key' },
    ]);
  });

  it("a key is its actor's, for one endpoint, for 24 hours", async () => {
    const { ctx } = context();
    await replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'shared' }, 'ops');
    // Another actor, or another endpoint, with the same key and another request: a replay of its own.
    expect((await replayEndpoint(ctx, 'crm', { since: '2h', idempotency_key: 'shared' }, 'someone-else')).repeated).toBeUndefined();
    expect((await replayEndpoint(ctx, 'all', { since: '2h', idempotency_key: 'shared' }, 'ops')).repeated).toBeUndefined();
    // A day later the key is free again.
    await db.pool.query(`update audit_log set created_at = now() - interval '25 hours'`);
    expect((await replayEndpoint(ctx, 'crm', { since: '2h', idempotency_key: 'shared' }, 'ops')).repeated).toBeUndefined();
    // Within the day it holds (the row just written).
    expect((await replayEndpoint(ctx, 'crm', { since: '2h', idempotency_key: 'shared' }, 'ops')).repeated).toBe(true);
  });

  it('an earlier audit row without an answer is a conflict, not a crash', async () => {
    const { ctx } = context();
    const hash = parseReplayRequest({ since: '1h' }).hash;
    await db.pool.query(
      `insert into audit_log (action, actor, target_type, target_id, details)
       values ('endpoint.replay', 'ops', 'endpoint', 'crm', jsonb_build_object('idempotency_key', 'bare', 'request_hash', $1::text))`,
      [hash],
    );
    await expect(replayEndpoint(ctx, 'crm', { since: '1h', idempotency_key: 'bare' }, 'ops')).rejects.toMatchObject({ status: 409 });
  });
});
