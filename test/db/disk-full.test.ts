// A full disk (SQLSTATE 53100, disk_full), simulated by triggers that raise it on every write to
// the job, attempt and event tables (as read-only, 25006, is simulated with
// default_transaction_read_only in test/fuzz/read-only.test.ts). A delivery whose outcome cannot be
// written keeps its job (running, under its lease), says so in a log line, and writes the outcome
// once there is room again, without sending twice; a notify answers 503 and writes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, makeUser, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const TABLES = ['job_queue', 'job_history', 'job_attempts', 'events'];

let db: TestDatabase;
let rx: Receiver;
let api: Api;
let token: string;

/** A promise, and the function that settles it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

async function fillDisk(): Promise<void> {
  await db.pool.query(`create function test_disk_full() returns trigger language plpgsql as $$
    begin
      raise exception using errcode = 'disk_full',
        message = format('could not extend file "base/%s": No space left on device', tg_table_name),
        hint = 'Check free disk space.';
    end $$`);
  for (const t of TABLES)
    await db.pool.query(`create trigger test_disk_full before insert or update on ${t} execute function test_disk_full()`);
}

/**
 * Dropping the triggers locks every table they sit on (job_history's partitions included) while the
 * service retries its writes against them: a deadlock there is the test's own, so try again.
 */
async function freeDisk(): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      await db.pool.query(`drop function if exists test_disk_full() cascade`);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || tries >= 5) throw err;
    }
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  api = await startApi(db, {
    notify: { webhook: { endpoints: [{ name: 'cfg', url: `${rx.url}/full`, secret: 'cfg-secret-123456', topics: ['*'] }] } },
  });
  token = await makeUser(db.pool, 'svc', 'service');
});
afterAll(async () => {
  await freeDisk().catch(() => undefined);
  await api?.close();
  await rx?.close();
  await db?.drop();
});

describe('a full disk (53100)', () => {
  it('an outcome that cannot be written keeps its job and is written once there is room; a notify is a 503 meanwhile', async () => {
    const answered = gate();
    rx.setResponder(async () => {
      await answered.wait;
      return { status: 200 };
    });
    const sent = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'disk.full', data: { n: 1 } } });
    expect(sent.status).toBe(202);
    const [id] = sent.body.job_ids as string[];
    // The delivery is under way (its answer held back) when the disk fills.
    await rx.waitForRequests(1, 20_000);
    await fillDisk();
    answered.open();

    // Said in a log line, naming the cause; the job is kept, running under its lease, nothing written for it.
    const said = await waitFor(() => api.events('job.write_error').find((l) => /No space left on device/.test(String(l['err']))), 20_000);
    expect(said).toMatchObject({ jobs: 1 });
    const job = async () =>
      (await db.pool.query<{ status: string; attempts: number }>(`select status, attempts from jobs where id = $1`, [id])).rows[0];
    expect(await job()).toEqual({ status: 'running', attempts: 1 });
    expect((await db.pool.query(`select 1 from webhook_attempts where job_id = $1`, [id])).rowCount).toBe(0);

    // A notify meanwhile: 503 (nothing written, nothing acknowledged), never a 2xx or a 500.
    const before = await rowCounts(db.pool);
    const refused = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'disk.full', data: { n: 2 } } });
    expect([refused.status, refused.body.error.code, refused.headers.get('retry-after')]).toEqual([503, 'unavailable', '5']);
    expect(refused.body.error.message).toMatch(/refuses writes \(read-only or full\)/);
    expect(await rowCounts(db.pool)).toEqual(before);

    // Room again: the outcome is written as it was (completed, its attempt row with it), the receiver asked once.
    await freeDisk();
    await waitFor(async () => (await job())?.status === 'completed', 30_000);
    const attempts = await db.pool.query<{ status_code: number }>(`select status_code from webhook_attempts where job_id = $1`, [id]);
    expect(attempts.rows).toEqual([{ status_code: 200 }]);
    expect(rx.requests).toHaveLength(1);
    const again = await call(api.url, 'POST', '/v1/notify', { token, body: { topic: 'disk.full', data: { n: 3 } } });
    expect(again.status).toBe(202);
    await rx.waitForRequests(2, 20_000);
  });
});
