import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { purgeOld } from '../../src/runners/purge.js';
import { Scheduler, type PeriodicRunner } from '../../src/runners/scheduler.js';
import { listPartitions, utcDay } from '../../src/history/partitions.js';
import { createTestDatabase, V7_AT, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, history_cleared, event_log, event_keys, notifications, audit_log, runner_state, users cascade',
  );
});
const schedulers: Scheduler[] = [];
afterEach(async () => {
  await Promise.all(schedulers.splice(0).map((s) => s.stop()));
});

function scheduler(runners: PeriodicRunner[]) {
  const logs = captureLogs();
  const s = new Scheduler({ pool: db.pool, log: logs.log });
  for (const r of runners) s.register(r);
  schedulers.push(s);
  return { s, ...logs };
}

describe('periodic runners', () => {
  it('a throwing runner logs runner.error and never stops the others', async () => {
    let good = 0;
    let bad = 0;
    const { s, events } = scheduler([
      {
        name: 'bad',
        intervalMs: 20,
        cluster: false,
        run: async () =>
          void (
            bad++,
            (() => {
              throw new Error('nope');
            })()
          ),
      },
      { name: 'good', intervalMs: 20, cluster: false, run: async () => void good++ },
    ]);
    s.start();
    await waitFor(() => good >= 5 && bad >= 5, 5_000);
    expect(events('runner.error').length).toBeGreaterThanOrEqual(5);
    expect(events('runner.error')[0]).toMatchObject({ runner: 'bad', err: 'nope' });
  });

  it('a runner error quoting a credential is logged with it censored', async () => {
    const { s, events, raw } = scheduler([
      {
        name: 'leaky',
        intervalMs: 60_000,
        cluster: false,
        run: async () => Promise.reject(new Error('connect to postgres://acw:runner-pw-1@db:5432/acw failed')),
      },
    ]);
    s.start();
    const line = await waitFor(() => events('runner.error')[0], 5_000);
    expect(line).toMatchObject({ runner: 'leaky', err: 'connect to postgres://acw:[redacted]@db:5432/acw failed' });
    expect(raw()).not.toContain('runner-pw-1');
  });

  it('a cluster runner runs once per interval across three replicas', async () => {
    const runs: number[] = [];
    const mk = (): PeriodicRunner => ({
      name: 'cluster_task',
      intervalMs: 400,
      cluster: true,
      run: async () => void runs.push(Date.now()),
    });
    const all = [scheduler([mk()]), scheduler([mk()]), scheduler([mk()])];
    for (const x of all) x.s.start();
    await waitFor(() => runs.length >= 4, 15_000);
    // Never one per replica, which would be three runs every interval with gaps near zero: every gap
    // is most of an interval (claimed up to half a check early). Lower bounds only.
    for (let i = 1; i < runs.length; i++) expect(runs[i]! - runs[i - 1]!).toBeGreaterThanOrEqual(200);
  });

  it('a cluster runner that ran recently does not run again when a process restarts', async () => {
    let n = 0;
    const task: PeriodicRunner = { name: 'daily', intervalMs: 24 * 3600_000, cluster: true, run: async () => void n++ };
    const first = scheduler([task]);
    first.s.start();
    await waitFor(() => n === 1);
    await first.s.stop();
    // The restarted process also has a never-run probe, registered after `daily`, and one database
    // connection: `daily`'s turn is decided before the probe's, so once the probe ran, `daily` had
    // its chance (no sleep needed).
    let probed = false;
    const probe: PeriodicRunner = { name: 'probe', intervalMs: 24 * 3600_000, cluster: true, run: async () => void (probed = true) };
    const one = new pg.Pool({ connectionString: db.url, max: 1 });
    const second = new Scheduler({ pool: one, log: captureLogs().log });
    second.register(task);
    second.register(probe);
    try {
      second.start();
      await waitFor(() => probed);
      expect(n).toBe(1);
    } finally {
      await second.stop();
      await one.end();
    }
    await db.pool.query(`update runner_state set last_run_at = now() - interval '25 hours'`);
    scheduler([task]).s.start();
    await waitFor(() => n === 2);
  });

  it('an embedding application registers its own runner (a workspace_fetch-style task)', async () => {
    await db.pool.query('create table if not exists workspaces (id int primary key, fetched_at timestamptz)');
    await db.pool.query('insert into workspaces values (1, null), (2, null) on conflict do nothing');
    const { s } = scheduler([]);
    s.register({
      name: 'workspace_fetch',
      intervalMs: 50,
      cluster: false,
      run: async ({ pool }) => {
        await pool.query('update workspaces set fetched_at = now() where fetched_at is null');
      },
    });
    s.start();
    const fetched = async () => (await db.pool.query('select count(*)::int as n from workspaces where fetched_at is not null')).rows[0].n;
    await waitFor(async () => (await fetched()) === 2);
    expect(await fetched()).toBe(2);
  });
});

const dayOf = (daysAgo: number): string => utcDay(Date.now() - daysAgo * 86_400_000);

describe('purge', () => {
  it('removes exactly what is past each retention: finished jobs by whole days with their attempts, the rest in batches', async () => {
    // Each event in a day of its own (events leave by the UTC day of their id).
    const ev = await db.pool.query(`insert into events (id, topic, data, dispatched_at, created_at)
      select ${V7_AT('t')}, 'a.b', '{}', case when d = 38 then null else now() end, t
        from unnest(array[40, 39, 38, 9]) with ordinality u(d, n), lateral (select now() - d * interval '1 day' as t) x
       order by n returning id`);
    const [oldEv, oldEvLiveJob, undispatched, recentEv] = ev.rows.map((r) => r.id as string);
    const jobs = await db.pool.query(
      `insert into jobs (type, status, completed_at, updated_at, created_at, event_id) values
        ('t', 'completed', now() - interval '8 days', now(), now() - interval '8 days', null),
        ('t', 'completed', now() - interval '6 days', now(), now() - interval '6 days', null),
        ('t', 'dead', null, now() - interval '31 days', now() - interval '31 days', null),
        ('t', 'dead', null, now() - interval '29 days', now() - interval '29 days', null),
        ('t', 'cancelled', null, now() - interval '31 days', now() - interval '31 days', null),
        ('t', 'pending', null, now() - interval '60 days', now() - interval '60 days', $1)
       returning id, created_at`,
      [oldEvLiveJob],
    );
    const ids = jobs.rows.map((r) => r.id as string);
    // Each job's attempt was made when it finished (the live one's just now).
    await db.pool.query(
      `insert into webhook_attempts (job_id, attempt, duration_ms, created_at)
       select j.id, 1, 1, case when j.status = 'pending' then now() else coalesce(j.completed_at, j.updated_at) end
       from jobs j where j.id = any($1::uuid[])`,
      [ids],
    );
    await db.pool.query(`insert into users (name, role) values ('u', 'admin')`);
    await db.pool.query(`insert into notifications (user_id, topic, read_at) select id, 'read-31d', now() - interval '31 days' from users`);
    // Unread ones go by id order, which is creation order (as audit rows below).
    await db.pool.query(
      `insert into notifications (user_id, topic, created_at) select id, 'unread-91d', now() - interval '91 days' from users`,
    );
    await db.pool.query(`insert into notifications (user_id, topic, read_at) select id, 'unread', null from users`);
    await db.pool.query(`insert into audit_log (action, created_at) values ('webhook.dead_letter', now() - interval '400 days')`);
    await db.pool.query(`insert into audit_log (action, created_at) values ('webhook.dead_letter', now() - interval '300 days')`);
    await db.pool.query(`insert into delivery_stats (minute, endpoint, slot, buckets, last_at) values
      (date_trunc('minute', now() - interval '9 days'), 'e', 0, '{}', now()), (date_trunc('minute', now()), 'e', 0, '{}', now())`);
    await db.pool.query(`insert into job_counts (minute, slot) values (date_trunc('minute', now() - interval '3 days'), 0)`);
    await db.pool.query(`insert into sessions (id_hash, user_id, expires_at) select 'gone', id, now() - interval '1 minute' from users`);
    await db.pool.query(`insert into sessions (id_hash, user_id, expires_at) select 'kept', id, now() + interval '1 hour' from users`);

    const counts = await purgeOld(db.pool, { completedRetentionMs: 168 * 3600_000, deadRetentionMs: 720 * 3600_000, batchSize: 1 });
    expect(counts).toMatchObject({
      completed: 1,
      dead: 2,
      attempts: 3,
      events: 1,
      event_days_kept: 2,
      notifications: 2,
      audit: 1,
      sessions: 1,
      endpoint_tombstones: 0,
      legacy_tables: 0,
    });
    // The days of the 31-, 29- and 8-day-old jobs in the completed sets; the 31-day-old one in the dead sets.
    const days = async (set: string) => (await listPartitions(db.pool)).filter((p) => p.set === set).map((p) => utcDay(p.from));
    for (const set of ['job_history_completed', 'job_attempts_completed']) {
      for (const d of [31, 29, 8]) expect(await days(set)).not.toContain(dayOf(d));
      expect(await days(set)).toContain(dayOf(6));
    }
    expect(await days('job_history_dead')).not.toContain(dayOf(31));
    expect(await days('job_history_dead')).toContain(dayOf(29));
    // Events: the 40-day-old day is dropped; the days holding an undispatched event or one a live job names stay whole.
    const eventDays = await days('event_log');
    expect(eventDays).not.toContain(dayOf(40));
    expect(eventDays).toEqual(expect.arrayContaining([dayOf(39), dayOf(38), dayOf(9)]));
    const left = (await db.pool.query('select id from jobs')).rows.map((r) => r.id).toSorted();
    expect(left).toEqual([ids[1], ids[3], ids[5]].toSorted());
    const att = (await db.pool.query('select job_id from webhook_attempts')).rows.map((r) => r.job_id).toSorted();
    expect(att).toEqual(left);
    // Events are kept past every job retention; an old one stays while a live job names it, or until dispatched.
    const evLeft = (await db.pool.query('select id from events')).rows.map((r) => r.id).toSorted();
    expect(evLeft).toEqual([oldEvLiveJob, undispatched, recentEv].toSorted());
    expect(evLeft).not.toContain(oldEv);
    expect((await db.pool.query('select topic from notifications')).rows).toEqual([{ topic: 'unread' }]);
    expect((await db.pool.query('select count(*)::int as n from audit_log')).rows[0].n).toBe(1);
    expect((await db.pool.query(`select id_hash from sessions`)).rows).toEqual([{ id_hash: 'kept' }]);
    // Counters older than the longest window read (a week for GET /v1/endpoints) are gone, the recent one stays.
    expect(counts.delivery_stats).toBeGreaterThanOrEqual(2);
    expect((await db.pool.query(`select count(*)::int as n from delivery_stats where minute < now() - interval '8 days'`)).rows[0].n).toBe(
      0,
    );
    expect((await db.pool.query(`select count(*)::int as n from delivery_stats where minute > now() - interval '1 hour'`)).rows[0].n).toBe(
      2,
    );
    // Nothing more to do: a second run removes nothing, and still keeps the two days of events.
    const opts = { completedRetentionMs: 168 * 3600_000, deadRetentionMs: 720 * 3600_000, batchSize: 1 };
    const again = await purgeOld(db.pool, opts);
    expect(again.event_days_kept).toBe(2);
    expect(Object.entries(again).every(([k, n]) => k === 'event_days_kept' || n === 0)).toBe(true);
    // Once the event is dispatched and the live job gone, their days go whole.
    await db.pool.query(`update events set dispatched_at = now() where id = $1`, [undispatched]);
    await db.pool.query(`delete from jobs where id = $1`, [ids[5]]);
    expect(await purgeOld(db.pool, opts)).toMatchObject({ events: 2, event_days_kept: 0, partitions: 2 });
    expect((await db.pool.query('select id from events')).rows).toEqual([{ id: recentEv }]);
  });

  it("keeps an event's day while a job of it is kept in history: one sent again long after its event, gone dead again", async () => {
    const ev = (
      await db.pool.query<{ id: string }>(
        `insert into events (id, topic, data, dispatched_at, created_at)
         select ${V7_AT('t')}, 'redriven.late', '{}', t, t from (select now() - interval '40 days' as t) x returning id`,
      )
    ).rows[0]!.id;
    // Redriven weeks after its event and dead again two days ago: history keeps it 30 days from then.
    const job = (
      await db.pool.query<{ id: string }>(
        `insert into jobs (type, status, updated_at, created_at, event_id) values ('webhook.deliver', 'dead', now() - interval '2 days',
           now() - interval '40 days', $1) returning id`,
        [ev],
      )
    ).rows[0]!.id;
    const opts = { completedRetentionMs: 168 * 3600_000, deadRetentionMs: 720 * 3600_000, batchSize: 100 };
    const kept = await purgeOld(db.pool, opts);
    expect(kept.event_days_kept).toBeGreaterThanOrEqual(1);
    expect((await db.pool.query('select 1 from events where id = $1', [ev])).rowCount).toBe(1);
    // Its job leaves history (here by hand): the day goes at the next run.
    await db.pool.query('delete from jobs where id = $1', [job]);
    await purgeOld(db.pool, opts);
    expect((await db.pool.query('select 1 from events where id = $1', [ev])).rowCount).toBe(0);
  });

  it('success_body_retention clears the bodies of 2xx attempts past it, by whole days, and keeps the attempts', async () => {
    const [job] = (
      await db.pool.query<{ id: string }>(
        `insert into jobs (type, status, completed_at, created_at) values ('t', 'completed', now() - interval '3 days', now() - interval '3 days') returning id`,
      )
    ).rows.map((r) => r.id);
    await db.pool.query(
      `insert into webhook_attempts (job_id, attempt, status_code, error_kind, response_body, duration_ms, created_at) values
        ($1, 1, 500, 'http_status', 'upstream down', 5, now() - interval '3 days 1 minute'),
        ($1, 2, 200, null, '{"received":true}', 5, now() - interval '3 days'),
        ($1, 3, 200, null, 'fresh', 5, now())`,
      [job],
    );
    const opts = {
      completedRetentionMs: 168 * 3600_000,
      deadRetentionMs: 720 * 3600_000,
      successBodyRetentionMs: 86_400_000,
      batchSize: 10,
    };
    expect(await purgeOld(db.pool, opts)).toMatchObject({ success_bodies: 1, attempts: 0 });
    const rows = await db.pool.query(`select attempt, response_body from webhook_attempts order by attempt`);
    expect(rows.rows).toEqual([
      { attempt: 1, response_body: 'upstream down' },
      { attempt: 2, response_body: null },
      { attempt: 3, response_body: 'fresh' },
    ]);
    // Each day once.
    expect(await purgeOld(db.pool, opts)).toMatchObject({ success_bodies: 0 });
  });

  // In the first hour of a UTC day yesterday is still made on purpose (a statement begun before
  // midnight writes its date), so the second run would drop it again then.
  it.skipIf(new Date().getUTCHours() === 0)(
    'a retention under a day drops the expired day partitions once, and the next run neither makes nor drops them again',
    async () => {
      const short = { completedRetentionMs: 60_000, deadRetentionMs: 60_000, batchSize: 100 };
      const yesterday = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
      const first = await purgeOld(db.pool, short);
      expect(first.partitions).toBeGreaterThanOrEqual(4);
      const left = (await listPartitions(db.pool)).filter((p) => p.from <= yesterday && p.set.startsWith('job_'));
      expect(left).toEqual([]);
      expect(await purgeOld(db.pool, short)).toMatchObject({ partitions: 0 });
      expect((await listPartitions(db.pool)).filter((p) => p.from <= yesterday && p.set.startsWith('job_'))).toEqual([]);
    },
  );

  it('audit_retention 0 keeps audit rows forever; a retention under a day deletes the rows of the day it cuts', async () => {
    await db.pool.query(`insert into audit_log (action, created_at) values ('webhook.dead_letter', now() - interval '4000 days')`);
    const ids = (
      await db.pool.query(
        `insert into jobs (type, status, completed_at, created_at) values
          ('t', 'completed', now() - interval '2 hours', now() - interval '2 hours'), ('t', 'completed', now() - interval '10 minutes', now())
         returning id`,
      )
    ).rows.map((r) => r.id as string);
    const counts = await purgeOld(db.pool, {
      completedRetentionMs: 3600_000,
      deadRetentionMs: 720 * 3600_000,
      auditRetentionMs: 0,
      batchSize: 10,
    });
    expect(counts).toMatchObject({ completed: 1, audit: 0 });
    expect((await db.pool.query('select id from jobs')).rows).toEqual([{ id: ids[1] }]);
    expect((await db.pool.query('select count(*)::int as n from audit_log')).rows[0].n).toBe(1);
  });
});
