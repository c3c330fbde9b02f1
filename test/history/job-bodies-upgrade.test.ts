import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { notify } from '../../src/outbox.js';
import { buildBody, webhookJobId } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

// Migration 0018 (docs/operations.md#upgrading): a job of an event in event_log no longer carries its
// body, its claim makes it from the event (docs/architecture.md#bodies-by-reference). It refuses while
// a process of an older version (which would find such a job malformed) runs; a job written before it
// keeps its body and sends it; a job written after it sends the body made from its event, signed.

const OLD = loadMigrations().filter((m) => m.id < 18);
const SECRET = 'upgrade-secret';

let db: TestDatabase;
let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver(() => ({ status: 200, body: 'ok' }));
  db = await createTestDatabase({ migrated: false });
  await migrate(db.pool, { schema: 'public', migrations: OLD });
});
afterAll(async () => {
  await db.drop();
  await rx.close();
});

describe('the upgrade to bodies by reference', () => {
  let olderJob = '';
  let olderBody = '';

  it('refuses while a process of an older version runs, naming it, and then changes nothing a job written before it sends', async () => {
    // A job as versions before it wrote them: pending, its body in its payload.
    const ev = (
      await db.pool.query<{ id: string; created_at: Date }>(
        `insert into event_log (topic, data, principal, dispatched_at) values ('order.paid', '{"b":1,"a":2}', 'outbox', now()) returning id, created_at`,
      )
    ).rows[0]!;
    olderJob = webhookJobId(ev.id, 'default');
    // The key order as an older HTTP notify kept it, which jsonb does not.
    olderBody = buildBody({ id: ev.id, topic: 'order.paid', occurredAt: ev.created_at, data: { b: 1, a: 2 } });
    await db.pool.query(
      `insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint)
       values ($1, 'webhook.deliver', jsonb_build_object('topic', 'order.paid', 'body', $2::text), 5, now() + interval '1 hour', $3, 'default')`,
      [olderJob, olderBody, ev.id],
    );
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, last_seen, layout) values ('old-host:7:cd', 'worker', 'old-host', 7, '0.1.0', true, now(), 3)`,
    );
    await expect(migrate(db.pool, { schema: 'public' })).rejects.toThrow(
      /0018_job_bodies .*processes of an older version are running: old-host:7:cd \(worker, last seen \d+ s ago\)/,
    );
    expect((await db.pool.query(`select max(id) as m from acw_migrations`)).rows[0].m).toBe(17);
    await db.pool.query(`update processes set last_seen = now() - interval '1 minute'`);
    await migrate(db.pool, { schema: 'public' });
    expect((await db.pool.query(`select max(id) as m from acw_migrations`)).rows[0].m).toBe(18);
    const kept = await db.pool.query(`select payload->>'body' as body from job_queue where id = $1`, [olderJob]);
    expect(kept.rows[0].body).toBe(olderBody);
  });

  it('delivers the older job with its own body, and a new one with the body made from its event, both signed over what was sent', async () => {
    const svc = await startTestService(db, { notify: { webhook: { url: rx.url, secret: SECRET, topics: ['*'] } } });
    try {
      await db.pool.query(`update job_queue set run_at = now() where id = $1`, [olderJob]);
      const id = await notify(db.pool, 'order.paid', { b: 1, a: 2, nested: { zz: true, y: null } });
      const newJob = webhookJobId(id, 'default');
      const seen = await waitForJobs(rx, [olderJob, newJob]);
      expect(seen.get(olderJob)!.body).toBe(olderBody);
      const sent = seen.get(newJob)!;
      const row = (await db.pool.query<{ created_at: Date }>(`select created_at from events where id = $1`, [id])).rows[0]!;
      expect(sent.body).toBe(
        `{"event_id":"${id}","topic":"order.paid","occurred_at":"${row.created_at.toISOString()}","data":{"a":2,"b":1,"nested":{"y":null,"zz":true}}}`,
      );
      for (const r of seen.values()) {
        const mac = createHmac('sha256', SECRET).update(`${r.headers['x-acw-timestamp']}.${r.body}`).digest('hex');
        expect(r.headers['x-acw-signature']).toBe(`sha256=${mac}`);
      }
      // The new job keeps no body; the older one kept its own into history.
      const stored = await db.pool.query<{ id: string; has: boolean }>(
        `select id, payload ? 'body' as has from jobs where id = any($1::uuid[])`,
        [[olderJob, newJob]],
      );
      expect(Object.fromEntries(stored.rows.map((r) => [r.id, r.has]))).toEqual({ [olderJob]: true, [newJob]: false });
    } finally {
      await svc.svc.stop();
    }
  }, 30_000);
});

async function waitForJobs(
  r: Receiver,
  ids: string[],
): Promise<Map<string, { body: string; headers: Record<string, string | string[] | undefined> }>> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const seen = new Map(
      r.requests
        .filter((q) => ids.includes(String(q.headers['x-acw-event-id'])))
        .map((q) => [String(q.headers['x-acw-event-id']), { body: q.body.toString(), headers: q.headers }]),
    );
    if (seen.size === ids.length) return seen;
    if (Date.now() > deadline) throw new Error(`delivered ${[...seen.keys()].join(', ')} of ${ids.join(', ')}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
