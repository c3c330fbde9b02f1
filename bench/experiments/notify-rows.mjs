// `node bench/experiments/notify-rows.mjs`: what PostgreSQL spends on the rows of a batch notify
// (issue 14), variant against variant, on one embedded PostgreSQL (bench/lib/pg.mjs settings).
// Each variant has its own database; a round writes NR_BATCHES transactions of NR_BATCH events
// with one job each into every variant, rotating which goes first, the statements as the batch
// route sends them (the events insert, then insertJobs from dist/). Prints the median wall time
// per event of the two inserts and of the commit, per variant, and the backend CPU per event.
//
//   base         the schema as migrated, random (version 4) event ids, as the route makes them
//   v7           event ids in time order (version 7 layout): index entries go to the right edge
//   -<index>     base without that index (what one index costs; never a proposal by itself)
//   ...nobody    the job's payload without the delivery body (a job that reads its body from its event)
//
//   NR_ROUNDS (3), NR_BATCHES (20), NR_BATCH (1000), NR_VARIANTS (base,v7)
import { randomBytes, randomUUID } from 'node:crypto';
import { startServer } from '../lib/pg.mjs';
import { dist } from '../lib/dist.mjs';
import { eventData, median, TOPIC } from '../lib/common.mjs';
import { cpuSeconds } from '../lib/proc.mjs';

const env = (k, d) => (process.env[k] ? Number(process.env[k]) : d);
const ROUNDS = env('NR_ROUNDS', 3);
const BATCHES = env('NR_BATCHES', 20);
const B = env('NR_BATCH', 1000);
const VARIANTS = (process.env.NR_VARIANTS ?? 'base,v7').split(',');

const { migrate } = await dist('db/migrate.js');
const { createPool } = await dist('db/pool.js');
const { insertJobs } = await dist('queue/transitions.js');
const { buildBody, webhookJobId } = await dist('webhook/job.js');

// The events insert as the batch route sends it (src/notify/event-document.ts).
const { INSERT_EVENTS } = await dist('notify/event-document.js');

// insertJobs without what only a held job or a debug log needs: no rows back, no held columns.
const BARE_JOBS = `insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint)
  select t.id, t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts, now(), t.event_id, t.endpoint
  from json_to_recordset($1::json) as t(id uuid, type text, payload jsonb, max_attempts int, event_id uuid, endpoint text)`;

let last = 0;
let seq = 0;
/** A version 7 layout: 48 bits of milliseconds, then random bits, version and variant set. */
function uuidv7() {
  const b = randomBytes(16);
  const ms = Math.max(Date.now(), last);
  last = ms;
  b.writeUIntBE(ms, 0, 6);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = b.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const server = await startServer();
const dbs = {};
for (const v of VARIANTS) {
  const name = `nr_${v.replace(/[^a-z0-9]/g, '_')}`;
  const url = await server.createDatabase(name);
  const pool = createPool({ url, size: 1, schema: 'public' });
  await migrate(pool, { schema: 'public' });
  if (v.endsWith('_key')) await pool.query(`alter table event_log drop constraint ${v.slice(1)}`);
  else if (v.startsWith('-')) await pool.query(`drop index ${v.slice(1)}`);
  const client = await pool.connect();
  const [{ pid }] = (await client.query('select pg_backend_pid() as pid')).rows;
  dbs[v] = {
    pool,
    client,
    pid,
    ids: v.startsWith('v7') ? uuidv7 : randomUUID,
    bare: v.endsWith('bare'),
    nobody: v.endsWith('nobody'),
    events: [],
    wall: [],
    commit: [],
    cpu: [],
  };
}

async function batch(d) {
  const now = Date.now();
  const events = Array.from({ length: B }, () => {
    const id = d.ids();
    const data = eventData(seq++);
    return { id, data, jobId: webhookJobId(id, 'bench') };
  });
  const doc = JSON.stringify(events.map((e) => ({ id: e.id, topic: TOPIC, data: e.data })));
  const jobs = events.map((e) => ({
    id: e.jobId,
    type: 'webhook.deliver',
    payload: d.nobody
      ? { topic: TOPIC }
      : { topic: TOPIC, body: buildBody({ id: e.id, topic: TOPIC, occurredAt: new Date(now), data: e.data }) },
    maxAttempts: 6,
    eventId: e.id,
    endpoint: 'bench',
  }));
  const cpu0 = cpuSeconds(d.pid);
  const t0 = performance.now();
  await d.client.query('begin');
  await d.client.query({ name: 'ev', text: INSERT_EVENTS, values: [doc, 'svc'] });
  const tm = performance.now();
  if (d.bare)
    await d.client.query({
      name: 'jb',
      text: BARE_JOBS,
      values: [
        JSON.stringify(
          jobs.map((j) => ({
            id: j.id,
            type: j.type,
            payload: j.payload,
            max_attempts: 6,
            delay: 0,
            event_id: j.eventId,
            endpoint: j.endpoint,
            held: false,
          })),
        ),
      ],
    });
  else await insertJobs(d.client, jobs, 'acw_jobs');
  const t1 = performance.now();
  d.events.push(((tm - t0) * 1000) / B);
  await d.client.query('commit');
  const t2 = performance.now();
  d.wall.push(((t1 - t0) * 1000) / B);
  d.commit.push(((t2 - t1) * 1000) / B);
  d.cpu.push(((cpuSeconds(d.pid) - cpu0) * 1e6) / B);
}

for (let r = 0; r < ROUNDS; r++) {
  const order = VARIANTS.map((_, k) => VARIANTS[(k + r) % VARIANTS.length]);
  for (let i = 0; i < BATCHES; i++) for (const v of order) await batch(dbs[v]);
  console.error(`round ${r + 1} of ${ROUNDS} done`);
}
for (const v of VARIANTS) {
  const d = dbs[v];
  console.log(
    JSON.stringify({
      variant: v,
      batches: d.wall.length,
      inserts_us_per_event: +median(d.wall).toFixed(1),
      events_us_per_event: +median(d.events).toFixed(1),
      commit_us_per_event: +median(d.commit).toFixed(1),
      backend_cpu_us_per_event: +median(d.cpu).toFixed(1),
    }),
  );
  d.client.release();
  await d.pool.end();
}
await server.stop();
