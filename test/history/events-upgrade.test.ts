import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { replayEndpoint, type ReplayContext } from '../../src/admin/replay.js';
import { parseConfig, resolveEndpoints } from '../../src/config/index.js';
import { dropLegacyEvents } from '../../src/history/upgrade.js';
import { silentLogger } from '../../src/log.js';
import { notify } from '../../src/outbox.js';
import { createTestDatabase, V7_AT, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

// The upgrade of a database with events from before their day partitions (migration 0012,
// docs/operations.md#upgrading): it refuses while an older process runs, renames the old table
// (kept readable through the `events` view), new events go to event_log at once, the old table's
// undispatched events are dispatched where they are, its keys still deduplicate, and it is dropped
// whole once past the events retention.

const OLD = loadMigrations().filter((m) => m.id < 12);
const EVENTS = 100_000;

let db: TestDatabase;
let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver(() => ({ status: 200, body: 'ok' }));
  db = await createTestDatabase({ migrated: false });
  await migrate(db.pool, { schema: 'public', migrations: OLD });
  // 100,000 dispatched events of the last 30 days with their finished deliveries (version 7 ids,
  // as written since migration 0010), one in a hundred keyed with its stored answer; 100 older
  // ones with random (version 4) ids; and 20 undispatched, written while the service was stopped.
  await db.pool.query(`select acw_make_partitions(d::date) from generate_series(now() - interval '31 days', now(), interval '1 day') d`);
  await db.pool.query(
    `with g as (select g, now() - (g % 43200) * interval '1 minute' as t from generate_series(1, $1::int) g),
     e as (
       insert into events (id, topic, data, principal, idempotency_key, request_hash, response, dispatched_at, created_at)
       select ${V7_AT('t')}, 'order.paid', jsonb_build_object('seq', g), 'api', case when g % 100 = 0 then 'key-' || g end,
         case when g % 100 = 0 then 'hash-' || g end, case when g % 100 = 0 then jsonb_build_object('seq', g) end, t, t
       from g returning id, created_at)
     insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, created_at, finished_at, event_id, endpoint,
       topic, series_started_at)
     select gen_random_uuid(), 'webhook.deliver', '{}', 'completed', 1, 6, created_at, created_at, created_at, id, 'default', 'order.paid',
       created_at
     from e`,
    [EVENTS],
  );
  await db.pool.query(
    `insert into events (id, topic, data, principal, dispatched_at, created_at)
     select gen_random_uuid(), 'order.paid', jsonb_build_object('old', g), 'outbox', now() - interval '20 days', now() - interval '20 days'
     from generate_series(1, 100) g`,
  );
  await db.pool.query(
    `insert into events (topic, data, principal) select 'order.paid', jsonb_build_object('waiting', g), 'outbox' from generate_series(1, 20) g`,
  );
}, 180_000);
afterAll(async () => {
  await db.drop();
  await rx.close();
});

const count = async (sql: string, values: unknown[] = []): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from ${sql}`, values)).rows[0]!.n;

describe('the upgrade to events by day', () => {
  let before: string[] = [];

  it('refuses while a process of an older version runs, naming it; then renames, every event readable by id', async () => {
    await db.pool.query(
      `insert into processes (id, mode, host, pid, version, jobs, last_seen, layout) values ('old-host:7:cd', 'worker', 'old-host', 7, '0.1.0', true, now(), 2)`,
    );
    await expect(migrate(db.pool, { schema: 'public' })).rejects.toThrow(
      /0012_events_partitioned .*processes of an older version are running: old-host:7:cd \(worker, last seen \d+ s ago\)/,
    );
    expect((await db.pool.query(`select to_regclass('events_v1') is null as none`)).rows[0].none).toBe(true);
    await db.pool.query(`update processes set last_seen = now() - interval '1 minute'`);
    before = (await db.pool.query<{ id: string }>(`select id from events`)).rows.map((r) => r.id);
    const t0 = performance.now();
    await migrate(db.pool, { schema: 'public' });
    // Reported, not asserted: what the locks of the rename are held for.
    console.log(`migration 0012 on ${EVENTS} events: ${Math.round(performance.now() - t0)} ms`);
    const after = (await db.pool.query<{ id: string }>(`select id from events`)).rows.map((r) => r.id);
    expect(new Set(after)).toEqual(new Set(before));
    expect(after).toHaveLength(EVENTS + 120);
    expect(await count('events_v1')).toBe(EVENTS + 120);
    expect(await count('event_log')).toBe(0);
  }, 60_000);

  it('new events go to event_log at once; a key of the old table still answers its event, a new one claims its own', async () => {
    const id = await notify(db.pool, 'order.paid', { fresh: true });
    expect(await count('event_log where id = $1', [id])).toBe(1);
    const oldKeyed = (await db.pool.query<{ id: string }>(`select id from events_v1 where idempotency_key = 'key-500'`)).rows[0]!.id;
    // The outbox's key is per principal: the old event's principal is `api`.
    expect((await db.pool.query(`select acw_notify('order.paid', '{}', '{}', 'key-500', 'api') as id`)).rows[0].id).toBe(oldKeyed);
    const keyed = await notify(db.pool, 'order.paid', { n: 1 }, { idempotencyKey: 'new-key' });
    expect(await notify(db.pool, 'order.paid', { n: 2 }, { idempotencyKey: 'new-key' })).toBe(keyed);
    expect(await count('event_keys where idempotency_key = $1', ['new-key'])).toBe(1);
    expect(await count('event_log')).toBe(2);
  });

  it('the outbox pump dispatches the old table undispatched events where they are, then the new ones', async () => {
    const { svc } = await startTestService(db, {
      notify: { webhook: { url: `${rx.url}/hook`, secret: 's3cret', topics: ['order.*'], allow_networks: ['127.0.0.0/8'] } },
    });
    try {
      await waitFor(async () => (await count('events where dispatched_at is null')) === 0, 30_000);
      expect(await count('events_v1 where dispatched_at is null')).toBe(0);
      await waitFor(() => rx.requests.length >= 22, 30_000);
      const waiting = rx.requests.filter((r) => r.body.includes('"waiting"'));
      expect(waiting).toHaveLength(20);
      // The old table is dropped whole without looking at jobs: its events' jobs carry their body.
      const bodies = await db.pool.query<{ with_body: number; without: number }>(
        `select count(*) filter (where j.payload ? 'body')::int as with_body, count(*) filter (where not j.payload ? 'body')::int as without
         from jobs j join events_v1 e on e.id = j.event_id where e.data ? 'waiting'`,
      );
      expect(bodies.rows[0]).toEqual({ with_body: 20, without: 0 });
    } finally {
      await svc.stop();
    }
  }, 60_000);

  it("a replay of the old table's events makes jobs that carry their body (the table is dropped whole without looking at jobs)", async () => {
    const config = parseConfig({
      jobs: { job_purge: { enabled: false } },
      notify: { webhook: { url: `${rx.url}/hook`, secret: 's3cret', topics: ['order.*'] } },
    });
    const ctx: ReplayContext = {
      pool: db.pool,
      endpoints: resolveEndpoints(config),
      purge: config.jobs.job_purge,
      maxAttempts: 3,
      jobsChannel: 'public.acw_jobs',
      log: silentLogger,
    };
    const at = Date.now() - 20 * 86_400_000;
    const window = { since: new Date(at - 600_000).toISOString(), until: new Date(at + 600_000).toISOString(), status: 'all' };
    const answer = await replayEndpoint(ctx, 'default', window, 'ops');
    expect(answer.created).toBeGreaterThanOrEqual(100);
    const made = await db.pool.query<{ with_body: number; without: number }>(
      `select count(*) filter (where j.payload ? 'body')::int as with_body, count(*) filter (where not j.payload ? 'body')::int as without
       from jobs j join events_v1 e on e.id = j.event_id where j.status = 'pending' and j.endpoint = 'default' and j.payload ? 'topic'`,
    );
    // The jobs it made (its resets are the seeded history jobs, whose payload has no topic).
    expect(made.rows[0]).toEqual({ with_body: answer.created, without: 0 });
    await db.pool.query(`delete from job_queue`);
  });

  it('the old table is dropped whole once past the events retention, the view made without it', async () => {
    // Not yet: the upgrade is younger than the retention.
    expect(await dropLegacyEvents(db.pool, 86_400_000)).toBe(0);
    expect(await count('events')).toBe(EVENTS + 122);
    await db.pool.query(`update acw_migrations set applied_at = now() - interval '40 days' where id = 12`);
    expect(await dropLegacyEvents(db.pool, 34 * 86_400_000)).toBe(1);
    expect((await db.pool.query(`select to_regclass('events_v1') is null as none`)).rows[0].none).toBe(true);
    expect(await count('events')).toBe(2);
    // Writes still go through: the outbox and a key.
    const id = await notify(db.pool, 'order.paid', { after: true }, { idempotencyKey: 'after-drop' });
    expect(await notify(db.pool, 'order.paid', { after: 2 }, { idempotencyKey: 'after-drop' })).toBe(id);
  });
});
