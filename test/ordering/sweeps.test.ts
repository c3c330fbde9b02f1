import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelJob } from '../../src/admin/job-actions.js';
import { completeJobs, insertKeyedJobs, lockKeys, reapJobs } from '../../src/queue/transitions.js';
import { sweepExpiredJobs } from '../../src/runners/expiry.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor } from '../helpers/logs.js';

// A key's head leaving by the operator's cancel, the expiry of held jobs or the reaper
// (docs/operations.md#ordered-delivery): the next job is woken with a NOTIFY at once, a strict
// key's expired head raises webhook.key_blocked, and the reaper takes the key's lock before the
// head's row, as a completion does.

const JOBS = 'acw_jobs_sweeps_test';
const ALERTS = 'acw_alerts_sweeps_test';
const MAX_AGE_MS = 3600_000;

let db: TestDatabase;
let listener: pg.Client;
let wakes = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`insert into users (name, role) values ('ann', 'admin'), ('vic', 'viewer')`);
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel === JOBS) wakes++;
  });
  await listener.query(`listen ${JOBS}`);
}, 30_000);
afterAll(async () => {
  await listener?.end();
  await db?.drop();
});

/** A key of `n` jobs for `endpoint` (one pending head, the rest behind); their ids in order. */
async function keyOf(endpoint: string, key: string, n: number, strict = false): Promise<string[]> {
  const jobs = Array.from({ length: n }, () => ({
    id: randomUUID(),
    type: 'webhook.deliver',
    payload: { topic: 'order.updated' },
    maxAttempts: 3,
    endpoint,
    orderingKey: key,
    strictOrdering: strict,
  }));
  await insertKeyedJobs(db.pool, jobs, 'nobody_listens');
  return jobs.map((j) => j.id);
}

const statuses = async (ids: readonly string[]): Promise<string[]> =>
  (await db.pool.query(`select id, status from jobs where id = any($1::uuid[])`, [ids])).rows
    .toSorted((a, b) => ids.indexOf(a.id) - ids.indexOf(b.id))
    .map((r) => r.status as string);

const sweep = () => sweepExpiredJobs(db.pool, { maxAgeMs: MAX_AGE_MS, alertsChannel: ALERTS, jobsChannel: JOBS, log: captureLogs().log });

describe('a head that leaves outside a delivery', () => {
  it("an operator's cancel of a head wakes the workers for the next job in its transaction", async () => {
    const ids = await keyOf('ep', 'cancelled', 3);
    const before = wakes;
    await cancelJob(db.pool, ids[0]!, 'ops', JOBS);
    expect(await statuses(ids)).toEqual(['cancelled', 'pending', 'pending']);
    // The third stays behind the new head (the jobs view shows it as pending, the table as behind).
    const raw = await db.pool.query(`select status from job_queue where id = $1`, [ids[2]]);
    expect(raw.rows[0].status).toBe('behind');
    await waitFor(() => wakes > before);
  });

  it('an expired head: the next job is woken (relaxed), or the key blocks with a webhook.key_blocked alert (strict)', async () => {
    const relaxed = await keyOf('ep', 'expires', 2);
    const strict = await keyOf('strict-ep', 'expires', 2, true);
    await db.pool.query(`update job_queue set series_started_at = now() - interval '2 hours' where id = any($1::uuid[])`, [
      [relaxed[0], strict[0]],
    ]);
    const before = wakes;
    const res = await sweep();
    expect(res.expired).toBe(2);
    expect(await statuses(relaxed)).toEqual(['dead', 'pending']);
    expect(await statuses(strict)).toEqual(['dead', 'pending']);
    await waitFor(() => wakes > before);

    const blocked = await db.pool.query(
      `select head, blocked_at from ordering_keys where endpoint = 'strict-ep' and ordering_key = 'expires'`,
    );
    expect(blocked.rows[0]).toMatchObject({ head: strict[0] });
    expect(blocked.rows[0].blocked_at).not.toBeNull();
    const alerts = await db.pool.query(`select target_id, details from audit_log where action = 'webhook.key_blocked'`);
    expect(alerts.rows).toEqual([
      {
        target_id: strict[0],
        details: { endpoint: 'strict-ep', ordering_key: 'expires', job_id: strict[0], last_error: 'endpoint unavailable' },
      },
    ]);
    const inbox = await db.pool.query(
      `select u.name from notifications n join users u on u.id = n.user_id where n.topic = 'webhook.key_blocked'`,
    );
    expect(inbox.rows).toEqual([{ name: 'ann' }]);
  });

  it('the reaper and a late completion of the same key do not deadlock', async () => {
    const ids = await keyOf('ep', 'reaped', 2);
    const token = randomUUID();
    // The head ran out of lease on its last attempt: the reaper sends it dead.
    await db.pool.query(
      `update job_queue set status = 'running', attempts = max_attempts, locked_by = 'w1', lease_token = $2,
         lease_expires_at = now() - interval '1 second' where id = $1`,
      [ids[0], token],
    );
    // The worker's completion comes late: it holds the key's lock when the reaper starts.
    const late = await db.pool.connect();
    try {
      await late.query('begin');
      await lockKeys(late, [{ endpoint: 'ep', key: 'reaped' }]);
      const reaped = reapJobs(db.pool, { batch: 100, channel: JOBS });
      // The reaper waits for a lock (the key's: it takes it before the head's row).
      await waitFor(async () => {
        const w = await db.pool.query(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return w.rows[0].n > 0;
      });
      // The completion writes the head's row: had the reaper taken that row first, one of the two is a deadlock.
      const done = await completeJobs(late, [{ leased: { id: ids[0]!, leaseToken: token } }]);
      await late.query('commit');
      expect([...done]).toEqual([ids[0]]);
      expect(await reaped).toEqual([]);
    } finally {
      late.release();
    }
    expect(await statuses(ids)).toEqual(['completed', 'pending']);
  });
});
