// PostgreSQL's cost per delivery of the claim and the complete alone (no HTTP, no dispatch): builds
// side by side, interleaved A/B/A/B because the VM is shared.
//
//   node bench/experiments/outcome-cpu.mjs JOBS ROUNDS DIST[|LABEL[|SQL]] ...
//   OUTCOME_BATCH=8 node bench/experiments/outcome-cpu.mjs 6000 2 file://$PWD/old/dist/ file://$PWD/dist/
//
// Each build (a dist/ URL with its migrations/ and package.json beside it, as for BENCH_DIST; SQL, if
// given, runs after the migration: a what-if) gets a fresh database of one embedded PostgreSQL with
// the bench's settings, JOBS webhook jobs of 20 endpoints with a 1 KiB body, ANALYZE while all are
// pending, a CHECKPOINT. Then OUTCOME_LOOPS (2) loops each claim up to 16 per endpoint with the
// fair claim (claimJobs with endpoint slots, as the worker does) and complete what they claimed, in
// statements of OUTCOME_BATCH (64) jobs with their attempt rows. Reported per job: PostgreSQL's CPU
// (the postmaster and its children, from /proc), WAL bytes, records and index entries
// (pg_walinspect), and the statements' pg_stat_statements lines.
import { randomUUID } from 'node:crypto';
import { startServer } from '../lib/pg.mjs';
import { pgCpuSeconds } from '../lib/proc.mjs';
import { walMark, walWritten } from '../lib/pgstats.mjs';

const [N, ROUNDS] = [Number(process.argv[2] ?? 10_000), Number(process.argv[3] ?? 2)];
const specs = process.argv.slice(4).map((s) => {
  const [url, label, sql] = s.split('|');
  return { url, label: label ?? url.split('/').slice(-3, -2)[0], sql };
});
const EPS = Array.from({ length: 20 }, (_, i) => `e${String(i).padStart(3, '0')}`);
const PER_EP = 16;
const LOOPS = Number(process.env.OUTCOME_LOOPS ?? 2);
const BATCH = Number(process.env.OUTCOME_BATCH ?? 64);
const body = JSON.stringify({ id: 'x', topic: 'order.paid', data: { pad: 'y'.repeat(900) } });

/** A version 7 UUID, as the service gives events. */
function v7() {
  const u = randomUUID().replaceAll('-', '');
  const x = Date.now().toString(16).padStart(12, '0') + '7' + u.slice(13);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** An attempt as the deliver handler reports a 2xx answer. */
const attempt = (ep) => ({
  attempt: 1,
  endpoint: ep,
  statusCode: 200,
  errorKind: null,
  error: null,
  durationMs: 101,
  responseBody: '{"received":true}',
  aborted: false,
});

const server = await startServer({ profile: true });
await server.admin.query('create extension if not exists pg_walinspect');
for (const s of specs) {
  s.t = await import(new URL('queue/transitions.js', s.url));
  s.migrate = (await import(new URL('db/migrate.js', s.url))).migrate;
  s.createPool = (await import(new URL('db/pool.js', s.url))).createPool;
  s.jobId = (await import(new URL('webhook/job.js', s.url))).webhookJobId;
}

async function measure(s, name) {
  const url = await server.createDatabase(name);
  const pool = s.createPool({ url, size: 10, schema: 'public' });
  try {
    await s.migrate(pool, { schema: 'public' });
    for (let i = 0; i < N; i += 1000) {
      const jobs = [];
      for (let k = i; k < Math.min(N, i + 1000); k++) {
        const ev = v7();
        const ep = EPS[k % EPS.length];
        jobs.push({
          id: s.jobId(ev, ep),
          type: 'webhook.deliver',
          payload: { topic: 'order.paid', body },
          maxAttempts: 6,
          eventId: ev,
          endpoint: ep,
        });
      }
      await s.t.enqueueJobs(pool, jobs, 'public.acw_jobs');
    }
    await pool.query('insert into endpoint_state (endpoint) select unnest($1::text[]) on conflict do nothing', [EPS]);
    if (s.sql) await pool.query(s.sql);
    await pool.query('vacuum analyze');
    await server.checkpoint();
    await pool.query('select pg_stat_statements_reset()');
    const cpu0 = pgCpuSeconds(`${server.dir}/pg`);
    const w0 = await walMark(server);
    const t0 = Date.now();
    let done = 0;
    const loop = async (li) => {
      for (;;) {
        const total = PER_EP * EPS.length;
        const plan = { workers: 0, deliveries: total, total, endpoints: new Map(EPS.map((e) => [e, PER_EP])) };
        const jobs = await s.t.claimJobs(pool, { workerId: `outcome-cpu:${li}`, leaseMs: 30_000, types: ['webhook.deliver'], plan });
        if (jobs.length === 0) return;
        for (let i = 0; i < jobs.length; i += BATCH) {
          const part = jobs.slice(i, i + BATCH);
          await s.t.completeJobs(
            pool,
            part.map((j) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, attempt: attempt(j.endpoint) })),
          );
        }
        done += jobs.length;
      }
    };
    await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)));
    const ms = Date.now() - t0;
    const cpu = pgCpuSeconds(`${server.dir}/pg`) - cpu0;
    const w = await walWritten(server, w0, await walMark(server));
    const top = await pool.query(
      `select calls, round(total_exec_time::numeric, 1) as ms, rows, wal_records, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) as q
         from pg_stat_statements where query ~ 'job_queue' order by total_exec_time desc limit 3`,
    );
    return {
      build: s.label,
      jobs: done,
      per_s: Math.round(done / (ms / 1000)),
      pg_us_per_job: Math.round((cpu * 1e6) / done),
      wal_bytes: Math.round(w.wal_bytes / done),
      wal_records: +(w.wal_records / done).toFixed(1),
      index_entries: +(w.index_entries / done).toFixed(1),
      statements: top.rows,
    };
  } finally {
    await pool.end();
    await server.dropDatabase(name);
  }
}

const medians = {};
try {
  for (let r = 1; r <= ROUNDS; r++) {
    for (const [i, s] of specs.entries()) {
      const res = await measure(s, `outcome_cpu_${r}_${i}`);
      console.log(JSON.stringify({ round: r, ...res }));
      (medians[s.label] ??= []).push(res.pg_us_per_job);
    }
  }
  console.log(JSON.stringify({ pg_us_per_job: medians }));
} finally {
  await server.stop();
}
