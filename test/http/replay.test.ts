// POST /v1/endpoints/:name/replay (docs/operations.md#replaying-an-endpoint) against real
// PostgreSQL and a real receiver: an outage's dead deliveries sent again with the same ids,
// completed ones with status all, jobs made for events that had none, the retention cut, dry runs,
// idempotency keys and bad input.
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { replayEndpoint } from '../../src/admin/replay.js';
import { parseConfig, resolveEndpoints } from '../../src/config/index.js';
import { verifyWebhook } from '../../src/verify.js';
import { webhookJobId } from '../../src/webhook/job.js';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, V7_AT, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const SECRET = 'replay-secret-0123';
let db: TestDatabase;
let rx: Receiver;
let api: Api | undefined;
let admin: string;

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users, endpoint_state cascade',
  );
  admin = await makeUser(db.pool, 'ops', 'admin');
  rx.setResponder(() => ({ status: 200, body: 'ok' }));
  rx.requests.splice(0);
});
afterEach(async () => {
  await api?.close();
  api = undefined;
});

const crm = (url: string) => ({ name: 'crm', url: `${url}/crm`, secret: SECRET, topics: ['crm.*'] });
const late = (url: string) => ({ name: 'late', url: `${url}/late`, secret: SECRET, topics: ['crm.paid'] });

async function start(endpoints: unknown[], over: Record<string, unknown> = {}): Promise<Api> {
  api = await startApi(db, {
    jobs: { poll_interval: '100ms' },
    notify: { webhook: { endpoints, circuit: { enabled: false } } },
    ...over,
  });
  return api;
}

const notify = async (a: Api, topic: string, n = 1): Promise<string[]> => {
  const token = await makeUser(db.pool, 'svc', 'service');
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await call(a.url, 'POST', '/v1/notify', { token, body: { topic, data: { i } } });
    expect(res.status).toBe(202);
    out.push(...res.body.job_ids);
  }
  return out;
};
const replay = (a: Api, name: string, body: unknown, token = admin) => call(a.url, 'POST', `/v1/endpoints/${name}/replay`, { token, body });
const statuses = async (ids: string[]) =>
  (await db.pool.query<{ status: string }>('select status from jobs where id = any($1::uuid[]) order by id', [ids])).rows.map(
    (r) => r.status,
  );
const allIn = (ids: string[], status: string) => waitFor(async () => (await statuses(ids)).every((s) => s === status), 15_000);
const jobRow = async (id: string) => (await db.pool.query('select * from jobs where id = $1', [id])).rows[0];

/**
 * Moves events, and every row about them, `ago` into the past: each timestamp column of the rows
 * that are the events, name them (event_id) or belong to a job that does (job_id). Found in the
 * catalog rather than by table name, so it follows the job tables wherever they are kept
 * (partitions are updated through their parent).
 */
async function backdate(pool: pg.Pool, eventIds: string[], ago: string): Promise<void> {
  const { rows } = await pool.query<{ name: string; columns: string[] }>(
    `select c.relname as name, array_agg(a.attname::text order by a.attnum) as columns
     from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_attribute a on a.attrelid = c.oid
     where n.nspname = current_schema() and c.relkind in ('r', 'p') and not c.relispartition and a.attnum > 0 and not a.attisdropped
     group by c.relname`,
  );
  const types = await pool.query<{ name: string; column: string }>(
    `select c.relname as name, a.attname as column from pg_class c join pg_namespace n on n.oid = c.relnamespace
     join pg_attribute a on a.attrelid = c.oid
     where n.nspname = current_schema() and a.atttypid in ('timestamptz'::regtype, 'timestamp'::regtype) and a.attnum > 0 and not a.attisdropped`,
  );
  const stamps = (t: string) => types.rows.filter((r) => r.name === t).map((r) => r.column);
  const ids = (col: string) => rows.filter((t) => t.columns.includes(col) && t.columns.includes('id'));
  const jobIds: string[] = [];
  for (const t of ids('event_id')) {
    jobIds.push(
      ...(await pool.query<{ id: string }>(`select id::text from "${t.name}" where event_id = any($1::uuid[])`, [eventIds])).rows.map(
        (r) => r.id,
      ),
    );
  }
  for (const t of rows) {
    const cols = stamps(t.name);
    const [where, keys] =
      t.name === 'event_log'
        ? ['id = any($2::uuid[])', eventIds]
        : t.columns.includes('event_id')
          ? ['event_id = any($2::uuid[])', eventIds]
          : t.columns.includes('job_id')
            ? ['job_id::text = any($2::text[])', jobIds]
            : [null, []];
    if (where === null || cols.length === 0) continue;
    await pool.query(`update "${t.name}" set ${cols.map((c) => `"${c}" = "${c}" - $1::interval`).join(', ')} where ${where}`, [ago, keys]);
  }
}

describe('replay after an outage', () => {
  it('dead deliveries come back with the same X-ACW-Event-Id, each as a new attempt series, with one audit row', async () => {
    rx.setResponder(() => ({ status: 503 }));
    const a = await start([crm(rx.url)]);
    const ids = await notify(a, 'crm.paid', 3);
    await allIn(ids, 'dead');
    const failed = rx.requests.length;
    expect(failed).toBe(9); // 3 jobs x max_attempts 3
    rx.setResponder(() => ({ status: 200 }));

    const res = await replay(a, 'crm', { since: '1h' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ endpoint: 'crm', status: 'dead', reset: 3, created: 0, unchanged: {}, retention_limited: false });
    await allIn(ids, 'completed');
    const again = rx.requests.slice(failed);
    expect(again.map((r) => r.headers['x-acw-event-id']).toSorted()).toEqual(ids.toSorted());
    for (const r of again) expect(verifyWebhook({ secret: SECRET, headers: r.headers, body: r.body })).toBe(true);
    // A fresh series: attempts counted from zero again (one spent on the delivery now), its age from the replay.
    const row = await jobRow(ids[0]!);
    expect(row.attempts).toBe(1);
    expect(row.series_started_at.getTime()).toBeGreaterThan(row.created_at.getTime());
    // Its history numbers every attempt once and says which series each belongs to: the three
    // original ones, then the replay's first (not a second "attempt 1" that reads like the first).
    const detail = await call(a.url, 'GET', `/v1/jobs/${ids[0]!}`, { token: admin });
    expect(detail.body.deliveries.map((d: { number: number; series: number; attempt: number }) => [d.number, d.series, d.attempt])).toEqual(
      [
        [1, 0, 1],
        [2, 0, 2],
        [3, 0, 3],
        [4, 1, 1],
      ],
    );
    const audit = (await db.pool.query(`select actor, target_type, target_id, details from audit_log where action = 'endpoint.replay'`))
      .rows;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      actor: 'ops',
      target_type: 'endpoint',
      target_id: 'crm',
      details: { endpoint: 'crm', reset: 3, created: 0 },
    });
    expect(audit[0].details.window).toEqual(res.body.window);
    expect(a.events('endpoint.replay')).toEqual([expect.objectContaining({ endpoint: 'crm', actor: 'ops', reset: 3, created: 0 })]);
  });

  it('status dead leaves completed jobs alone; status all re-sends them with the same id; running, pending and cancelled stay as they are', async () => {
    const a = await start([crm(rx.url)]);
    const [done] = await notify(a, 'crm.paid');
    await allIn([done!], 'completed');
    const [running, pending, cancelled] = await notify(a, 'crm.other', 3);
    await allIn([running!, pending!, cancelled!], 'completed');
    // Fixtures for the states a replay must not touch (direct writes: the test is not about how they got there).
    await db.pool.query(
      `update jobs set status = 'running', locked_by = 'elsewhere', lease_token = gen_random_uuid(),
      lease_expires_at = now() + interval '1 hour', completed_at = null where id = $1`,
      [running],
    );
    await db.pool.query(`update jobs set status = 'pending', run_at = now() + interval '1 hour', completed_at = null where id = $1`, [
      pending,
    ]);
    await db.pool.query(`update jobs set status = 'cancelled', completed_at = null where id = $1`, [cancelled]);
    const before = rx.requests.length;

    const dead = await replay(a, 'crm', { since: '1h', status: 'dead' });
    expect(dead.body).toMatchObject({ reset: 0, created: 0, unchanged: { completed: 1, running: 1, pending: 1, cancelled: 1 } });
    const all = await replay(a, 'crm', { since: '1h', status: 'all' });
    expect(all.body).toMatchObject({ status: 'all', reset: 1, unchanged: { running: 1, pending: 1, cancelled: 1 } });
    await waitFor(() => rx.requests.length > before, 10_000);
    await allIn([done!], 'completed');
    expect(rx.requests.slice(before).map((r) => r.headers['x-acw-event-id'])).toEqual([done]);
    expect(await jobRow(running!)).toMatchObject({ status: 'running', locked_by: 'elsewhere' });
    expect(await jobRow(pending!)).toMatchObject({ status: 'pending', attempts: 1 });
    expect((await jobRow(cancelled!)).status).toBe('cancelled');
  });

  it('only the window: jobs made before since or after until are not replayed', async () => {
    rx.setResponder(() => ({ status: 410 }));
    const a = await start([crm(rx.url)]);
    const [old, inside, recent] = await notify(a, 'crm.paid', 3);
    await allIn([old!, inside!, recent!], 'dead');
    await db.pool.query(`update jobs set created_at = now() - interval '3 hours' where id = $1`, [old]);
    await db.pool.query(`update jobs set created_at = now() - interval '90 minutes' where id = $1`, [inside]);
    rx.setResponder(() => ({ status: 200 }));
    const res = await replay(a, 'crm', { since: '2h', until: '1h' });
    expect(res.body).toMatchObject({ reset: 1 });
    await allIn([inside!], 'completed');
    expect(await statuses([old!, recent!])).toEqual(['dead', 'dead']);
    const until = new Date(res.body.window.until).getTime();
    expect(Math.abs(until - (Date.now() - 3600_000))).toBeLessThan(60_000);
  });
});

describe('replay creates jobs for events the endpoint has none for', () => {
  it('an endpoint added to the config after the events gets them, with the id the fan-out would give; the whitelist applies', async () => {
    const first = await start([crm(rx.url)]);
    const paid = await notify(first, 'crm.paid', 2);
    await notify(first, 'crm.refunded'); // not in late's whitelist
    await allIn(paid, 'completed');
    const events = (await db.pool.query<{ id: string }>(`select id from events where topic = 'crm.paid' order by created_at`)).rows.map(
      (r) => r.id,
    );
    await first.close();
    api = undefined;

    const second = await start([crm(rx.url), late(rx.url)]);
    const dry = await replay(second, 'late', { since: '1h', dry_run: true });
    expect(dry.body).toMatchObject({ reset: 0, created: 2, dry_run: true });
    const before = rx.requests.length;
    const res = await replay(second, 'late', { since: '1h' });
    expect(res.body).toMatchObject({ reset: 0, created: 2 });
    const lateIds = events.map((e) => webhookJobId(e, 'late'));
    await allIn(lateIds, 'completed');
    const got = rx.requests.slice(before);
    expect(got.map((r) => r.url)).toEqual(['/late', '/late']);
    expect(got.map((r) => r.headers['x-acw-event-id']).toSorted()).toEqual(lateIds.toSorted());
    // The body is the one the fan-out makes: the event itself, its time of notify.
    const body = JSON.parse(got[0]!.body.toString('utf8'));
    expect(Object.keys(body)).toEqual(['event_id', 'topic', 'occurred_at', 'data']);
    expect(events).toContain(body.event_id);
    // Again: nothing left to create, and the new jobs are completed, not dead.
    const again = await replay(second, 'late', { since: '1h' });
    expect(again.body).toMatchObject({ reset: 0, created: 0 });
  });
});

describe('dry run and retention', () => {
  it('a dry run gives the counts of the real run and writes nothing', async () => {
    rx.setResponder(() => ({ status: 410 }));
    const a = await start([crm(rx.url)]);
    const ids = await notify(a, 'crm.paid', 2);
    await allIn(ids, 'dead');
    const counts = await rowCounts(db.pool);
    const jobsBefore = (await db.pool.query('select * from jobs order by id')).rows;
    const dry = await replay(a, 'crm', { since: '1h', dry_run: true, idempotency_key: 'k-dry' });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ reset: 2, created: 0, dry_run: true });
    expect(await rowCounts(db.pool)).toEqual(counts);
    expect((await db.pool.query('select * from jobs order by id')).rows).toEqual(jobsBefore);
    const real = await replay(a, 'crm', { since: '1h' });
    expect({ reset: real.body.reset, created: real.body.created }).toEqual({ reset: dry.body.reset, created: dry.body.created });
  });

  it('across a real purge: what the purge deleted is not sent again, and the answer says the window was cut', async () => {
    const a = await start([crm(rx.url)], { jobs: { job_purge: { completed_retention: '1h', dead_retention: '2h' } } });
    // Read through the API only (and the purge runner's log line), whatever tables keep the jobs.
    const status = async (id: string) => (await call(a.url, 'GET', `/v1/jobs/${id}`, { token: admin })).body.status as string;
    const completed = (ids: string[]) =>
      waitFor(async () => (await Promise.all(ids.map(status))).every((st) => st === 'completed'), 15_000);
    const [old1, old2, young] = await notify(a, 'crm.paid', 3);
    await completed([old1!, old2!, young!]);
    // X-ACW-Event-Id is the delivery's id: the job's.
    expect(rx.requests.map((r) => r.headers['x-acw-event-id']).toSorted()).toEqual([old1!, old2!, young!].toSorted());
    // Delivered 90 minutes ago: past completed_retention, so the purge deletes their jobs (their
    // events stay, as events do for 24 h at least).
    const purgedEvents: string[] = [];
    for (const id of [old1!, old2!]) purgedEvents.push((await call(a.url, 'GET', `/v1/jobs/${id}`, { token: admin })).body.event_id);
    await backdate(db.pool, purgedEvents, '90 minutes');
    const purgedBefore = a.events('job.purged').length;
    await a.svc.scheduler.runNow('job_purge');
    expect(a.events('job.purged').slice(purgedBefore)).toEqual([expect.objectContaining({ completed: 2, dead: 0 })]);
    for (const id of [old1!, old2!]) expect((await call(a.url, 'GET', `/v1/jobs/${id}`, { token: admin })).status).toBe(404);
    expect((await call(a.url, 'GET', `/v1/jobs/${young}`, { token: admin })).status).toBe(200);

    // A window from 3 h ago crosses the purge: it is cut at the shorter retention (1 h ago), where
    // the purged events would otherwise look as if they had never had a job for this endpoint.
    const sent = rx.requests.length;
    const dry = await replay(a, 'crm', { since: '3h', status: 'all', dry_run: true });
    const res = await replay(a, 'crm', { since: '3h', status: 'all' });
    expect(res.status).toBe(200);
    for (const r of [dry.body, res.body]) {
      expect(r).toMatchObject({ retention_limited: true, reset: 1, created: 0 });
      expect(r.note).toContain('jobs.job_purge');
      expect(Math.abs(new Date(r.window.since).getTime() - (Date.now() - 3600_000))).toBeLessThan(60_000);
      expect(new Date(r.requested_since).getTime()).toBeLessThan(new Date(r.window.since).getTime());
    }
    // Sent again: the young delivery, with its own id. Once every job of the endpoint is finished,
    // the receiver has had nothing else, and no job exists for the purged events.
    await completed([young!]);
    await waitFor(async () => {
      const open = await call(a.url, 'GET', '/v1/jobs?endpoint=crm&status=pending', { token: admin });
      const running = await call(a.url, 'GET', '/v1/jobs?endpoint=crm&status=running', { token: admin });
      return open.body.items.length + running.body.items.length === 0;
    }, 15_000);
    expect(rx.requests.slice(sent).map((r) => r.headers['x-acw-event-id'])).toEqual([young]);
    for (const e of purgedEvents) {
      expect((await call(a.url, 'GET', `/v1/jobs?event_id=${e}`, { token: admin })).body.items).toEqual([]);
    }
    // A window inside the retention is not cut.
    const inside = await replay(a, 'crm', { since: '30m', status: 'all', dry_run: true });
    expect(inside.body).toMatchObject({ retention_limited: false, reset: 1 });
    expect(inside.body).not.toHaveProperty('note');
  });
});

describe('idempotency key', () => {
  it('the same key again answers the first answer and writes nothing; with another request it is a 409', async () => {
    rx.setResponder(() => ({ status: 410 }));
    const a = await start([crm(rx.url)]);
    const ids = await notify(a, 'crm.paid', 2);
    await allIn(ids, 'dead');
    rx.setResponder(() => ({ status: 200 }));
    const first = await replay(a, 'crm', { since: '1h', idempotency_key: 'outage-42' });
    expect(first.body).toMatchObject({ reset: 2 });
    await allIn(ids, 'completed');
    const counts = await rowCounts(db.pool);
    const sent = rx.requests.length;
    const second = await replay(a, 'crm', { since: '1h', idempotency_key: 'outage-42' });
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ ...first.body, repeated: true });
    expect(await rowCounts(db.pool)).toEqual(counts);
    const other = await replay(a, 'crm', { since: '2h', idempotency_key: 'outage-42' });
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: 'idempotency_conflict', details: { field: 'idempotency_key' } });
    expect(await rowCounts(db.pool)).toEqual(counts);
    // Without a key a replay of the same window is another replay (status all would resend).
    expect((await replay(a, 'crm', { since: '1h', status: 'all' })).body).toMatchObject({ reset: 2 });
    await waitFor(() => rx.requests.length >= sent + 2, 10_000);
  });
});

describe('bad input', () => {
  it('is a 4xx naming the field, and writes nothing', async () => {
    const a = await start([crm(rx.url)]);
    const viewer = await makeUser(db.pool, 'watcher', 'viewer');
    const counts = await rowCounts(db.pool);
    const cases: Array<[string, unknown, number, string]> = [
      ['nope', { since: '1h' }, 404, 'name'],
      ['crm', {}, 400, 'since'],
      ['crm', { since: 'yesterday' }, 400, 'since'],
      ['crm', { since: '1h', until: '2026-13-01T00:00:00Z' }, 400, 'until'],
      ['crm', { since: '1h', until: '2h' }, 400, 'since'],
      ['crm', { since: '2026-12-01T00:00:00Z', until: '2026-12-01T00:00:00Z' }, 400, 'since'],
      ['crm', { since: '1h', status: 'completed' }, 400, 'status'],
      ['crm', { since: '1h', dry_run: 'yes' }, 400, 'dry_run'],
      ['crm', { since: '1h', dryRun: true }, 400, 'dryRun'],
      ['crm', { since: '1h', idempotency_key: '' }, 400, 'idempotency_key'],
    ];
    for (const [name, body, status, field] of cases) {
      const res = await replay(a, name, body);
      expect({ name, body, status: res.status }).toEqual({ name, body, status });
      expect(res.body.error.details.field).toBe(field);
      expect(res.body.error.message).toMatch(new RegExp(`^${field}: `));
    }
    expect((await replay(a, 'crm', { since: '1h' }, viewer)).status).toBe(403);
    expect(await rowCounts(db.pool)).toEqual(counts);
  });

  it('no hostile body yields a 5xx; every refusal writes nothing', async () => {
    const a = await start([crm(rx.url)]);
    const bodies = [
      'null',
      'true',
      '"str"',
      '[]',
      '{"since":null}',
      '{"since":"99999999999h"}',
      '{"since":"-5h"}',
      '{"since":"0001-01-01T00:00:00Z","dry_run":true}',
      '{"since":"1h","until":"9999-12-31T23:59:59Z","dry_run":true}',
      '{"since":"\\ud800"}',
      '{"since":"1h","status":"\\u0000"}',
      '{"since":"1h","idempotency_key":"\\u0000"}',
      '{"constructor":{"prototype":{"x":1}}}',
      '\u0000',
    ];
    for (const raw of bodies) {
      const pre = await rowCounts(db.pool);
      const res = await call(a.url, 'POST', '/v1/endpoints/crm/replay', { token: admin, raw });
      const refused = res.status >= 400;
      // A refusal carries a snake_case code; an accepted body has none to check.
      const code: string = refused ? String(res.body.error?.code) : 'accepted';
      expect({ raw, below500: res.status < 500, rows: refused ? await rowCounts(db.pool) : pre, code: /^[a-z_]+$/.test(code) }).toEqual({
        raw,
        below500: true,
        rows: pre,
        code: true,
      });
    }
  });
});

describe('the statements', () => {
  it(
    'read the endpoint range of the jobs index and the window of the events index, never a whole table',
    { timeout: 120_000 },
    async () => {
      await db.pool.query(
        `select acw_make_partitions(d::date) from generate_series(now() - interval '31 days', now(), interval '1 day') d`,
      );
      // A month of jobs for eight endpoints and of events, dead and completed, and a two-hour window.
      await db.pool.query(
        `insert into event_log (id, topic, data, dispatched_at, created_at)
       select ${V7_AT('t')}, case when g % 3 = 0 then 'crm.paid' else 'other.x' end, '{}', now(), t
       from generate_series(1, 60000) g, lateral (select now() - (g % 43200) * interval '1 minute' as t) x`,
      );
      // Straight into job_history (its days made first): 60,000 rows through the jobs view's trigger take long.
      await db.pool.query(
        `insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, endpoint, event_id, created_at, finished_at,
         series_started_at)
       select gen_random_uuid(), 'webhook.deliver', '{}', case when g % 2 = 0 then 'completed' else 'dead' end, 1, 6, now(),
         case when g % 8 = 0 then 'crm' else 'ep' || (g % 8) end, gen_random_uuid(),
         now() - (g % 43200) * interval '1 minute', now() - (g % 43200) * interval '1 minute', now()
       from generate_series(1, 60000) g`,
      );
      await db.pool.query('analyze job_history');
      await db.pool.query('analyze job_queue');
      await db.pool.query('analyze event_log');
      const seen: Array<{ text: string; values: unknown[] }> = [];
      const recording = {
        connect: async () => {
          const c = await db.pool.connect();
          return new Proxy(c, {
            get(target, key) {
              if (key === 'query')
                return (q: string | { text: string; values?: unknown[] }, values?: unknown[]) => {
                  seen.push(typeof q === 'string' ? { text: q, values: values ?? [] } : { text: q.text, values: q.values ?? [] });
                  return target.query(q as string, values);
                };
              const v: unknown = Reflect.get(target, key);
              return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
            },
          });
        },
      } as unknown as pg.Pool;
      const config = parseConfig({ notify: { webhook: { endpoints: [crm(rx.url)] } } });
      const ctx = { pool: recording, endpoints: resolveEndpoints(config), purge: config.jobs.job_purge, maxAttempts: 3, jobsChannel: 'x' };
      const dry = await replayEndpoint(ctx, 'crm', { since: '2h', status: 'all', dry_run: true }, 'tester');
      const real = await replayEndpoint(ctx, 'crm', { since: '2h', status: 'all' }, 'tester');
      expect(dry.reset).toBeGreaterThan(0);
      expect(dry.created).toBeGreaterThan(0);
      expect({ reset: real.reset, created: real.created }).toEqual({ reset: dry.reset, created: dry.created });
      const statements = seen.filter((s) => /\b(jobs|events|event_log)\b/.test(s.text));
      expect(statements.length).toBeGreaterThanOrEqual(5);
      // No sequential scan of a table of any size (an empty day partition, or a handful of live jobs,
      // is read whole at no cost, and the planner rightly says so).
      const rows = new Map(
        (
          await db.pool.query<{ relname: string; n: number }>(`select relname, reltuples::float8 as n from pg_class where relkind = 'r'`)
        ).rows.map((r) => [r.relname, r.n]),
      );
      let windowReads = 0;
      for (const s of statements) {
        const plan = await db.pool.query(`explain (format json) ${s.text}`, s.values);
        const scans: string[] = [];
        const eventDays = new Set<string>();
        const walk = (node: { 'Node Type'?: string; 'Relation Name'?: string; Plans?: unknown[] }): void => {
          if (node['Node Type'] === 'Seq Scan' && (rows.get(node['Relation Name'] ?? '') ?? 0) > 1000) scans.push(node['Relation Name']!);
          if (node['Relation Name']?.startsWith('event_log_p')) eventDays.add(node['Relation Name']);
          for (const p of node.Plans ?? []) walk(p as typeof node);
        };
        walk(plan.rows[0]['QUERY PLAN'][0].Plan);
        expect({ sql: s.text.slice(0, 120), scans }).toEqual({ sql: s.text.slice(0, 120), scans: [] });
        // The window's events are read from its days' partitions alone (two hours, a day of margin for
        // the ids' clock on each side): not from the month's.
        expect(eventDays.size).toBeLessThanOrEqual(4);
        if (/from event_log/.test(s.text)) windowReads++;
      }
      // The window's events were read (a dry run and a real one), each time from a few days only.
      expect(windowReads).toBeGreaterThanOrEqual(2);
    },
  );
});
