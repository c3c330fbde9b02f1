// `node bench/experiments/copy-rows.mjs`: what PostgreSQL spends on the rows of a keyless batch
// notify, written as the route wrote them before (an INSERT from a JSON document for the events, one
// for the jobs) against COPY FROM STDIN for both (src/db/copy.ts), variant against variant on one embedded PostgreSQL
// (bench/lib/pg.mjs settings). Each variant has its own database; a round writes CR_BATCHES
// transactions of CR_BATCH events with one job each into every variant, rotating which goes first.
// Prints the median wall time per event of the writes and the commit, and the backend CPU per event
// (the mean: /proc counts CPU in 10 ms ticks).
//
//   CR_ROUNDS (3), CR_BATCHES (20), CR_BATCH (1000)
import { startServer } from '../lib/pg.mjs';
import { dist } from '../lib/dist.mjs';
import { eventData, median, TOPIC } from '../lib/common.mjs';
import { cpuSeconds } from '../lib/proc.mjs';

const env = (k, d) => (process.env[k] ? Number(process.env[k]) : d);
const ROUNDS = env('CR_ROUNDS', 3);
const BATCHES = env('CR_BATCHES', 20);
const B = env('CR_BATCH', 1000);
const VARIANTS = ['insert', 'copy'];

const { migrate } = await dist('db/migrate.js');
const { createPool } = await dist('db/pool.js');
const { webhookJobId } = await dist('webhook/job.js');
const { newEventId } = await dist('notify/event-id.js');
const { INSERT_EVENTS } = await dist('notify/event-document.js');
const { copyRows: copy, copyField: copyText } = await dist('db/copy.js');

const INSERT_JOBS = `with ins as (
  insert into job_queue (id, type, payload, max_attempts, run_at, event_id, endpoint)
  select t.id, t.type, coalesce(t.payload, 'null'::jsonb), t.max_attempts, now() + t.delay * interval '1 millisecond', t.event_id, t.endpoint
  from json_to_recordset($1::json) as t(id uuid, type text, payload jsonb, max_attempts int, delay int, event_id uuid, endpoint text))
select pg_notify($2, '')`;

const server = await startServer();
const dbs = {};
for (const v of VARIANTS) {
  const url = await server.createDatabase(`cr_${v}`);
  const pool = createPool({ url, size: 1, schema: 'public' });
  await migrate(pool, { schema: 'public' });
  const client = await pool.connect();
  const [{ pid }] = (await client.query('select pg_backend_pid() as pid')).rows;
  dbs[v] = { pool, client, pid, wall: [], commit: [], cpu: [] };
}

let seq = 0;
async function batch(v) {
  const d = dbs[v];
  const events = Array.from({ length: B }, () => {
    const id = newEventId();
    return { id, data: JSON.stringify(eventData(seq++)), jobId: webhookJobId(id, 'bench') };
  });
  const cpu0 = cpuSeconds(d.pid);
  const t0 = performance.now();
  const [began] = (await d.client.query('begin; select now()::text as now')).slice(1);
  const now = began.rows[0].now;
  if (v === 'insert') {
    const doc = `[${events.map((e) => `{"id":"${e.id}","topic":"${TOPIC}","data":${e.data}}`).join(',')}]`;
    await d.client.query({ name: 'ev', text: INSERT_EVENTS, values: [doc, 'svc'] });
    const rows = events.map((e) => ({
      id: e.jobId,
      type: 'webhook.deliver',
      payload: { topic: TOPIC },
      max_attempts: 6,
      delay: 0,
      event_id: e.id,
      endpoint: 'bench',
    }));
    await d.client.query({ name: 'jb', text: INSERT_JOBS, values: [JSON.stringify(rows), 'acw_jobs'] });
  } else {
    const ev = events.map((e) => `${e.id}\t${TOPIC}\t${copyText(e.data)}\tsvc\t${now}\n`).join('');
    const payload = copyText(JSON.stringify({ topic: TOPIC }));
    const jb = events.map((e) => `${e.jobId}\twebhook.deliver\t${payload}\t6\t${e.id}\tbench\n`).join('');
    await copy(d.client, 'copy event_log (id, topic, data, principal, dispatched_at) from stdin', ev);
    await copy(d.client, 'copy job_queue (id, type, payload, max_attempts, event_id, endpoint) from stdin', jb);
    await d.client.query({ name: 'nt', text: `select pg_notify($1, '')`, values: ['acw_jobs'] });
  }
  const t1 = performance.now();
  await d.client.query('commit');
  const t2 = performance.now();
  d.wall.push(((t1 - t0) * 1000) / B);
  d.commit.push(((t2 - t1) * 1000) / B);
  d.cpu.push(((cpuSeconds(d.pid) - cpu0) * 1e6) / B);
}

for (let r = 0; r < ROUNDS; r++) {
  const order = VARIANTS.map((_, k) => VARIANTS[(k + r) % VARIANTS.length]);
  for (let i = 0; i < BATCHES; i++) for (const v of order) await batch(v);
  console.error(`round ${r + 1} of ${ROUNDS} done`);
}
for (const v of VARIANTS) {
  const d = dbs[v];
  const [{ events, jobs }] = (
    await d.client.query('select (select count(*)::int from event_log) as events, (select count(*)::int from job_queue) as jobs')
  ).rows;
  console.log(
    JSON.stringify({
      variant: v,
      batches: d.wall.length,
      events,
      jobs,
      writes_us_per_event: +median(d.wall).toFixed(1),
      commit_us_per_event: +median(d.commit).toFixed(1),
      backend_cpu_us_per_event: +(d.cpu.reduce((a, b) => a + b, 0) / d.cpu.length).toFixed(1),
    }),
  );
  d.client.release();
  await d.pool.end();
}
await server.stop();
