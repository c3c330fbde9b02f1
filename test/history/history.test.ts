import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getJob, listJobs } from '../../src/admin/jobs.js';
import { redriveJobs, retryJob } from '../../src/admin/job-actions.js';
import { dropPartition, listPartitions } from '../../src/history/partitions.js';
import { notifyMany } from '../../src/outbox.js';
import { purgeOld } from '../../src/runners/purge.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

// Live jobs apart from their history (docs/architecture.md#live-jobs-and-history), against a real
// service and receiver: a finished job is where the operator looks for it, moves back with its id,
// and a day of history leaves while deliveries run.

const JOBS = 'public.acw_jobs';
let db: TestDatabase;
let rx: Receiver;
beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver((req) => (req.body.includes('"fail"') ? { status: 410, body: 'gone for good' } : { status: 200, body: 'ok' }));
});
afterAll(async () => {
  await rx.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log cascade',
  );
  rx.requests.length = 0;
});

const endpoint = () => ({
  notify: { webhook: { url: `${rx.url}/hook`, secret: 's3cret', topics: ['order.*'], allow_networks: ['127.0.0.0/8'] } },
});
const where = async (id: string) =>
  (
    await db.pool.query<{ t: string }>(
      `select 'job_queue' as t from job_queue where id = $1 union all select 'job_history' from job_history where id = $1`,
      [id],
    )
  ).rows.map((r) => r.t);

describe('finished jobs in history', () => {
  it('are listed and shown with their attempts; retry and redrive move them back to the queue with their ids', async () => {
    const { svc } = await startTestService(db, endpoint());
    try {
      await notifyMany(db.pool, [
        { topic: 'order.paid', data: { n: 1 } },
        { topic: 'order.paid', data: { n: 2, kind: 'fail' } },
      ]);
      await waitFor(async () => (await db.pool.query(`select count(*)::int as n from job_history`)).rows[0].n === 2, 15_000);
      const { items } = await listJobs(db.pool, { limit: 10 });
      const done = items.find((j) => j.status === 'completed')!;
      const dead = items.find((j) => j.status === 'dead')!;
      expect([done.topic, dead.topic]).toEqual(['order.paid', 'order.paid']);
      expect(await where(done.id)).toEqual(['job_history']);
      const shown = await getJob(db.pool, dead.id);
      expect(shown!.deliveries).toEqual([expect.objectContaining({ attempt: 1, status_code: 410, response_body: 'gone for good' })]);
      expect((await listJobs(db.pool, { status: 'dead', topic: 'order.paid' })).items.map((j) => j.id)).toEqual([dead.id]);
      // A dead job's attempts keep as long as it does: in the dead set.
      expect((await db.pool.query(`select dead from job_attempts where job_id = $1`, [dead.id])).rows).toEqual([{ dead: true }]);

      const before = rx.requests.length;
      expect(await retryJob(db.pool, done.id, 'ops', JOBS)).toMatchObject({ id: done.id, status: 'pending', attempts: 0 });
      expect(await redriveJobs(db.pool, { status: 'dead', endpoint: 'default' }, 'ops', JOBS)).toEqual({ count: 1 });
      await rx.waitForRequests(before + 2, 15_000);
      const again = rx.requests.slice(before).map((r) => r.headers['x-acw-event-id']);
      expect(again.toSorted()).toEqual([done.id, dead.id].toSorted());
      await waitFor(async () => (await where(done.id))[0] === 'job_history' && (await where(dead.id))[0] === 'job_history', 15_000);
      // Each once: a job is in exactly one table.
      expect(await where(done.id)).toEqual(['job_history']);
      expect((await getJob(db.pool, done.id))!.deliveries).toHaveLength(2);
    } finally {
      await svc.stop();
    }
  });
});

describe('day partitions', () => {
  it('a finish that finds no partition for today makes the days and is written on its retry', async () => {
    const today = (await listPartitions(db.pool)).filter((p) => p.from <= Date.now() && Date.now() < p.to && p.set.startsWith('job_'));
    expect(today.map((p) => p.set).toSorted()).toEqual([
      'job_attempts_completed',
      'job_attempts_dead',
      'job_history_completed',
      'job_history_dead',
    ]);
    // As if every process had been down past the days made ahead.
    for (const p of today) await db.pool.query(`drop table ${p.name}`);
    await db.pool.query(`delete from history_bounds`);
    // The runners that make days ahead (hourly, and the purge) have just run, so only the failed
    // write can make them now.
    await db.pool.query(
      `insert into runner_state (name, last_run_at) values ('history_partitions', now()), ('job_purge', now())
       on conflict (name) do update set last_run_at = now()`,
    );
    const { svc, events } = await startTestService(db, endpoint());
    try {
      // Start-up made them again: gone once more.
      for (const p of today) await db.pool.query(`drop table if exists ${p.name}`);
      const [id] = await notifyMany(db.pool, [{ topic: 'order.paid', data: { n: 1 } }]);
      await waitFor(async () => (await db.pool.query(`select 1 from job_history where event_id = $1`, [id])).rowCount === 1, 20_000);
      expect(events('job.write_error').some((l) => String(l.err).includes('no partition'))).toBe(true);
      expect((await listPartitions(db.pool)).filter((p) => p.from <= Date.now() && Date.now() < p.to)).toHaveLength(6);
    } finally {
      await svc.stop();
    }
  });
});

describe('the purge', () => {
  it('drops a day of history while deliveries run, with no error on the live path', async () => {
    // Three days of finished jobs a month back, with their attempts.
    await db.pool.query(
      `insert into jobs (type, payload, status, completed_at, created_at)
       select 'webhook.deliver', '{"topic":"order.old"}', 'completed', now() - interval '40 days' + (g % 3) * interval '1 day',
         now() - interval '40 days' from generate_series(1, 300) g`,
    );
    const { svc, events } = await startTestService(db, endpoint());
    try {
      let sent = 0;
      const sending = (async () => {
        for (let i = 0; i < 40; i++) {
          await notifyMany(
            db.pool,
            Array.from({ length: 25 }, (_, k) => ({ topic: 'order.paid', data: { i, k } })),
          );
          sent += 25;
        }
      })();
      // Purge as the runner would, while the events above are dispatched and delivered.
      await waitFor(() => rx.requests.length > 50, 15_000);
      const counts = await purgeOld(db.pool, { completedRetentionMs: 7 * 86_400_000, deadRetentionMs: 30 * 86_400_000, batchSize: 100 });
      expect(counts.completed).toBe(300);
      expect(counts.partitions).toBeGreaterThanOrEqual(3);
      await sending;
      await waitFor(
        async () => (await db.pool.query(`select count(*)::int as n from job_history where status = 'completed'`)).rows[0].n === sent,
        30_000,
      );
      expect(new Set(rx.requests.map((r) => r.headers['x-acw-event-id'])).size).toBe(sent);
      expect(events('job.write_error')).toEqual([]);
      expect(events('job.claim_error')).toEqual([]);
      expect(events('job.lease_lost')).toEqual([]);
      // The month-old days are gone from the catalog; today's and the days ahead are there.
      const days = (await listPartitions(db.pool)).map((p) => p.from);
      expect(Math.min(...days)).toBeGreaterThan(Date.now() - 3 * 86_400_000);
    } finally {
      await svc.stop();
    }
  });

  it('finishes a detach that a dead process left half done', async () => {
    await db.pool.query(
      `insert into jobs (type, payload, status, completed_at, created_at)
       values ('t', '{}', 'completed', now() - interval '50 days', now() - interval '50 days')`,
    );
    const part = (await listPartitions(db.pool)).find((p) => p.set === 'job_history_completed' && p.from < Date.now() - 40 * 86_400_000)!;
    // A detach that did not finish: the partition is marked pending, as after a crash mid-way.
    const other = await db.pool.connect();
    try {
      await other.query('begin');
      await other.query(`select count(*) from ${part.name}`);
      const detaching = db.pool
        .query(`alter table job_history_completed detach partition ${part.name} concurrently`)
        .catch((e: Error) => e);
      await waitFor(async () => (await listPartitions(db.pool)).find((p) => p.name === part.name)?.detachPending === true, 10_000);
      await db.pool.query(
        `select pg_cancel_backend(pid) from pg_stat_activity where query like 'alter table job_history_completed detach partition%' and pid <> pg_backend_pid()`,
      );
      expect(await detaching).toBeInstanceOf(Error);
    } finally {
      await other.query('rollback');
      other.release();
    }
    const pending = (await listPartitions(db.pool)).find((p) => p.name === part.name)!;
    expect(pending.detachPending).toBe(true);
    expect(await dropPartition(db.pool, pending)).toBe(1);
    expect((await listPartitions(db.pool)).some((p) => p.name === part.name)).toBe(false);
  });
});
