import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { purgeOld } from '../../src/runners/purge.js';
import { Scheduler, type PeriodicRunner } from '../../src/runners/scheduler.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate jobs, webhook_attempts, events, notifications, runner_state, users cascade');
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

describe('purge', () => {
  it('deletes exactly what is past retention, with its attempt rows, and keeps the audit log', async () => {
    const ev = await db.pool.query(`insert into events (topic, data, dispatched_at, created_at) values
      ('a.b', '{}', now(), now() - interval '9 days'), ('a.b', '{}', now(), now() - interval '9 days'), ('a.b', '{}', now(), now()) returning id`);
    const [oldEv, oldEvWithJob, newEv] = ev.rows.map((r) => r.id as string);
    const jobs = await db.pool.query(
      `insert into jobs (type, status, completed_at, updated_at, event_id) values
        ('t', 'completed', now() - interval '8 days', now(), null),
        ('t', 'completed', now() - interval '6 days', now(), $1),
        ('t', 'dead', null, now() - interval '31 days', null),
        ('t', 'dead', null, now() - interval '29 days', null),
        ('t', 'cancelled', null, now() - interval '31 days', null),
        ('t', 'pending', null, now() - interval '60 days', null)
       returning id, status, completed_at, updated_at`,
      [oldEvWithJob],
    );
    const ids = jobs.rows.map((r) => r.id as string);
    await db.pool.query(`insert into webhook_attempts (job_id, attempt, duration_ms) select unnest($1::uuid[]), 1, 1`, [ids]);
    await db.pool.query(`insert into users (name, role) values ('u', 'admin')`);
    await db.pool.query(`insert into notifications (user_id, topic, read_at) select id, 'x', now() - interval '31 days' from users`);
    await db.pool.query(`insert into notifications (user_id, topic, read_at) select id, 'y', null from users`);
    await db.pool.query(`insert into audit_log (action, created_at) values ('webhook.dead_letter', now() - interval '400 days')`);

    const counts = await purgeOld(db.pool, { completedRetentionMs: 168 * 3600_000, deadRetentionMs: 720 * 3600_000, batchSize: 1 });
    expect(counts).toEqual({ completed: 1, dead: 2, events: 1, notifications: 1, endpoint_tombstones: 0 });
    const left = (await db.pool.query('select id from jobs')).rows.map((r) => r.id).toSorted();
    expect(left).toEqual([ids[1], ids[3], ids[5]].toSorted());
    const att = (await db.pool.query('select job_id from webhook_attempts')).rows.map((r) => r.job_id).toSorted();
    expect(att).toEqual(left);
    const evLeft = (await db.pool.query('select id from events')).rows.map((r) => r.id).toSorted();
    expect(evLeft).toEqual([oldEvWithJob, newEv].toSorted());
    expect(evLeft).not.toContain(oldEv);
    expect((await db.pool.query('select topic from notifications')).rows).toEqual([{ topic: 'y' }]);
    expect((await db.pool.query('select count(*)::int as n from audit_log')).rows[0].n).toBe(1);
  });
});
