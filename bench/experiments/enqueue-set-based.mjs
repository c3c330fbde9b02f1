// `node bench/experiments/enqueue-set-based.mjs`: batch enqueue through the outbox, interleaved on one
// embedded PostgreSQL (bench/lib/pg.mjs settings), 50,000 events in batches of 1000, each run in a
// fresh database, autocommit per batch like the benchmark's enqueue (bench/systems/acw.mjs):
//
//   per-event   notifyMany before migration 0003: one acw_notify() call per event (its own
//               INSERT ... ON CONFLICT, lookup and pg_notify), the same zod validation
//   set-based   notifyMany of the build in dist/ (or BENCH_DIST): acw_notify_many(jsonb), one insert
//               and one pg_notify per batch
//   graphile    graphile-worker's addJobs, as the benchmark's enqueue scenario runs it
//   per-event-keyed, set-based-keyed   the same, every event with its own idempotency key
//
// The machine is shared and noisy: only figures from one interleaved run compare. Each round runs
// every variant once, rotating which goes first. Prints one line per run, the medians, and the
// median of the per-round ratios to the first variant.
//   ENQ_ROUNDS (3), ENQ_EVENTS (50000), ENQ_BATCH (1000), ENQ_VARIANTS (per-event,set-based,graphile)
import pg from 'pg';
import { startServer } from '../lib/pg.mjs';
import { dist } from '../lib/dist.mjs';
import { eventData, TOPIC } from '../lib/common.mjs';
import * as graphile from '../systems/graphile.mjs';

const env = (k, d) => (process.env[k] ? Number(process.env[k]) : d);
const ROUNDS = env('ENQ_ROUNDS', 3);
const N = env('ENQ_EVENTS', 50000);
const B = env('ENQ_BATCH', 1000);
const VARIANTS = (process.env.ENQ_VARIANTS ?? 'per-event,set-based,graphile').split(',');

const { notifyMany } = await dist('outbox.js');
const { notifyInput } = await dist('notify/input.js');
const { migrate } = await dist('db/migrate.js');
const { createPool } = await dist('db/pool.js');

/** notifyMany as it was before migration 0003 (src/outbox.ts at cf80ee5), validation included. */
async function notifyManyPerEvent(client, events) {
  const evs = events.map((e) => {
    const p = notifyInput.safeParse({
      topic: e.topic,
      data: e.data,
      ...(e.idempotencyKey !== undefined ? { idempotency_key: e.idempotencyKey } : {}),
    });
    if (!p.success) throw new Error('invalid');
    return p.data;
  });
  const res = await client.query(
    `select public.acw_notify(e->>'topic', e->'data',
        array(select jsonb_array_elements_text(coalesce(e->'recipients', '[]'))), e->>'idempotency_key') as id
     from jsonb_array_elements($1::jsonb) with ordinality as t(e, n) order by n`,
    [JSON.stringify(evs)],
  );
  return res.rows.map((r) => String(r.id));
}

/** Drop a run's database once its clients are gone (graphile's utils end their pool lazily; a forced
 *  drop would kill a connection still open and crash us with an unhandled pool error). */
async function dropWhenIdle(server, db) {
  for (let i = 0; i < 100; i++) {
    const r = await server.admin.query('select count(*)::int as n from pg_stat_activity where datname = $1', [db]);
    if (r.rows[0].n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await server.dropDatabase(db);
}

async function runAcw(server, variant) {
  const db = 'enq_' + Math.random().toString(36).slice(2, 8);
  const url = await server.createDatabase(db);
  const pool = createPool({ url, size: 2, schema: 'public' });
  await migrate(pool, { schema: 'public' });
  await pool.end();
  await server.checkpoint();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const keyed = variant.endsWith('-keyed');
  const fn = variant.startsWith('per-event') ? notifyManyPerEvent : notifyMany;
  try {
    await client.query('select 1');
    const t0 = performance.now();
    for (let i = 0; i < N; i += B) {
      const evs = [];
      for (let k = i; k < Math.min(N, i + B); k++)
        evs.push({ topic: TOPIC, data: eventData(k), ...(keyed ? { idempotencyKey: `order-${k}` } : {}) });
      const ids = await fn(client, evs);
      if (ids.length !== evs.length) throw new Error(`${variant}: ${ids.length} ids for ${evs.length} events`);
    }
    const ms = performance.now() - t0;
    const c = await client.query('select count(*)::int n from events');
    if (c.rows[0].n !== N) throw new Error(`${variant}: ${c.rows[0].n} events rows, expected ${N}`);
    return ms;
  } finally {
    await client.end();
    await dropWhenIdle(server, db);
  }
}

async function runGraphile(server) {
  const db = 'enq_' + Math.random().toString(36).slice(2, 8);
  await graphile.createTemplate(server, db);
  await server.checkpoint();
  try {
    const { ms } = await graphile.enqueue(server.urlFor(db), { mode: 'deliver', n: N, batch: B });
    return ms;
  } finally {
    await dropWhenIdle(server, db);
  }
}

const median = (xs) => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)];

const server = await startServer();
const results = Object.fromEntries(VARIANTS.map((v) => [v, []]));
try {
  console.log(`# ${N} events in batches of ${B}, ${ROUNDS} interleaved rounds, PostgreSQL ${server.version}`);
  for (let r = 0; r < ROUNDS; r++) {
    const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]);
    for (const v of order) {
      const ms = v === 'graphile' ? await runGraphile(server) : await runAcw(server, v);
      const rate = Math.round(N / (ms / 1000));
      results[v].push(rate);
      console.log(`round ${r + 1} ${v.padEnd(16)} ${rate} events/s`);
    }
  }
  console.log('# medians');
  for (const v of VARIANTS) console.log(`${v.padEnd(16)} ${median(results[v])} events/s  (${results[v].join(', ')})`);
  // Within a round the variants ran back to back, so a round's ratio is less exposed to the load others put on the machine.
  console.log(`# median of the per-round ratios to ${VARIANTS[0]}`);
  for (const v of VARIANTS.slice(1)) {
    const ratios = results[v].map((x, i) => x / results[VARIANTS[0]][i]);
    console.log(`${v.padEnd(16)} ${median(ratios).toFixed(2)}x  (${ratios.map((x) => x.toFixed(2)).join(', ')})`);
  }
} finally {
  await server.stop();
}
