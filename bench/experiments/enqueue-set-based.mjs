// `node bench/experiments/enqueue-set-based.mjs`: notifyMany (one acw_notify() call per event) against
// a set-based INSERT ... SELECT FROM jsonb_array_elements + one pg_notify, 50,000 events in batches
// of 1000 on the build in dist/ (or BENCH_DIST). Evidence for the enqueue tuning note in README.md.
import { startServer } from '../lib/pg.mjs';
import { dist } from '../lib/dist.mjs';
import { eventData, TOPIC } from '../lib/common.mjs';
const { notifyMany } = await dist('outbox.js');
const { migrate } = await dist('db/migrate.js');
const { createPool } = await dist('db/pool.js');
const server = await startServer();
const N = 50000, B = 1000;
const SET_SQL = `with ins as (
  insert into events (topic, data, recipients, principal, idempotency_key)
  select e->>'topic', e->'data', '{}', 'outbox', e->>'idempotency_key'
  from jsonb_array_elements($1::jsonb) with ordinality t(e, n) order by n
  on conflict (principal, idempotency_key) do nothing returning id)
select id from ins, (select pg_notify('public.acw_events', '')) x`;
try {
  for (const variant of ['notifyMany', 'set-based', 'set-based-no-validate', 'notifyMany', 'set-based', 'set-based-no-validate']) {
    const db = 'q' + Math.random().toString(36).slice(2, 8);
    const url = await server.createDatabase(db);
    const pool = createPool({ url, size: 2, schema: 'public' });
    await migrate(pool, { schema: 'public' });
    const client = await pool.connect();
    const { notifyInput } = await dist('notify/input.js');
    const t0 = performance.now();
    for (let i = 0; i < N; i += B) {
      const evs = [];
      for (let k = i; k < i + B; k++) evs.push({ topic: TOPIC, data: eventData(k) });
      if (variant === 'notifyMany') await notifyMany(client, evs);
      else {
        if (variant === 'set-based') for (const e of evs) notifyInput.parse(e);
        await client.query(SET_SQL, [JSON.stringify(evs)]);
      }
    }
    const ms = performance.now() - t0;
    const c = await client.query('select count(*)::int n from events');
    console.log(variant, Math.round(N / (ms / 1000)), 'events/s', c.rows[0].n);
    client.release();
    await pool.end();
    await server.dropDatabase(db);
  }
} finally {
  await server.stop();
}
