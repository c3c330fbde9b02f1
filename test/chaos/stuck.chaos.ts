// A stuck session: a client left idle in a transaction holding a lock on an undispatched event
// row, and an application transaction that wrote an event through the outbox and went idle. The
// queue keeps moving past both; each event is delivered once its session ends.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  checkOutcome,
  count,
  endpointOf,
  killStarted,
  outboxEvents,
  report,
  scaled,
  startChaosReceiver,
  startService,
  workDir,
  writeConfig,
  type ChaosReceiver,
} from './harness.js';
import { notify } from '../../src/outbox.js';

let db: TestDatabase;
let rx: ChaosReceiver;
const sessions: pg.Client[] = [];
const work = workDir();
beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startChaosReceiver('hooks');
});
afterAll(async () => {
  await killStarted();
  await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
  await rx.close();
  await db.drop();
  work.remove();
});

async function session(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: db.url, application_name: 'chaos-stuck' });
  c.on('error', () => undefined);
  await c.connect();
  sessions.push(c);
  return c;
}

it('a session idle in a transaction, holding an event row: the queue keeps moving, and the event is delivered once it ends', async () => {
  const t0 = Date.now();
  const n = scaled(1000, 100);
  // Written while no service runs, so it is still undispatched when the lock is taken.
  const [locked] = await outboxEvents(db.pool, 1, 'locked');
  const holder = await session();
  await holder.query('begin');
  await holder.query('select id from events where id = $1 for update', [locked]);
  // An application transaction that notified through the outbox and then stalled.
  const app = await session();
  await app.query('begin');
  const pendingApp = await notify(app, 'chaos.event', { tag: 'uncommitted' });

  const cfg = writeConfig(work.dir, 'stuck.yaml', [endpointOf(rx)], {});
  const a = await startService('serve', cfg, db.url);
  const moving = await outboxEvents(db.pool, n, 'moving', 50);
  // Every later event is delivered while both sessions sit idle in their transactions.
  await rx.waitForCount(n);
  expect(await count(db.pool, `select count(*)::int as n from events where dispatched_at is null`)).toBe(1);
  expect(await count(db.pool, `select count(*)::int as n from jobs where event_id = $1`, [locked])).toBe(0);
  expect(
    await count(
      db.pool,
      `select count(*)::int as n from pg_stat_activity where application_name = 'chaos-stuck' and state = 'idle in transaction'`,
    ),
  ).toBe(2);

  await holder.query('rollback');
  await app.query('commit');
  const out = await checkOutcome({
    pool: db.pool,
    accepted: [locked!, pendingApp, ...moving],
    endpoints: [{ receiver: rx }],
    maxDuplicates: 0,
  });
  expect(await a.stop()).toBe(0);
  report('stuck session', t0, { events: n + 2, ...out });
});
