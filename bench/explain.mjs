// `node bench/explain.mjs`: EXPLAIN (ANALYZE, BUFFERS) of acw-webhooks' own claim and complete
// statements (captured from claimJobs / completeJobs in dist, so always the current SQL), as
// node-pg runs them: named prepared statements, so after five executions PostgreSQL may switch to
// a generic plan. Each is shown with plan_cache_mode force_custom_plan and force_generic_plan, on
// a table of BENCH_JOBS pending jobs (+ BENCH_EXPLAIN_COMPLETED completed rows). Every statement
// runs in a transaction that is rolled back.
import pg from 'pg';
import { startServer } from './lib/pg.mjs';
import { dist } from './lib/dist.mjs';
import { layoutOf, loadFinished } from './lib/history-data.mjs';

const N = Number(process.env.BENCH_JOBS ?? 50_000);
const COMPLETED = Number(process.env.BENCH_EXPLAIN_COMPLETED ?? 0);
const LIMIT = Number(process.env.BENCH_EXPLAIN_LIMIT ?? 64);

const { claimJobs, completeJobs, enqueueJobs } = await dist('queue/transitions.js');
const { migrate } = await dist('db/migrate.js');
const { createPool } = await dist('db/pool.js');

/** A Queryable that records the statement instead of running it, answering with `rows`. */
function capture(rows = []) {
  const seen = [];
  return {
    seen,
    query: async (cfg, values) => {
      seen.push(typeof cfg === 'string' ? { text: cfg, values } : cfg);
      return { rows };
    },
  };
}

const server = await startServer();
try {
  const url = await server.createDatabase('explain_acw');
  const pool = createPool({ url, size: 2, schema: 'public' });
  await migrate(pool, { schema: 'public' });
  // On the history layout (migration 0010) live jobs are in job_queue and finished ones in job_history.
  const history = await layoutOf(pool).then((l) => l === 'history');
  if (COMPLETED > 0 && history) {
    const c = await pool.connect();
    const now = Date.now();
    await loadFinished(c, { rows: COMPLETED, fromMs: now - 3_600_000, toMs: now, style: 'backlog' }).finally(() => c.release());
  } else if (COMPLETED > 0) {
    await pool.query(
      `insert into jobs (type, payload, status, attempts, completed_at, endpoint) select 'webhook.deliver', '{}', 'completed', 1, now(), 'default' from generate_series(1, $1::int)`,
      [COMPLETED],
    );
  }
  for (let i = 0; i < N; i += 1000) {
    const jobs = [];
    for (let k = i; k < Math.min(N, i + 1000); k++)
      jobs.push({ type: 'webhook.deliver', payload: { topic: 'order.paid', body: 'x'.repeat(250) }, maxAttempts: 6, endpoint: 'default' });
    await enqueueJobs(pool, jobs, 'public.acw_jobs');
  }
  await pool.query(history ? 'vacuum analyze job_queue, job_history' : 'vacuum analyze jobs');

  const claimCapture = capture();
  await claimJobs(claimCapture, { workerId: 'explain:1:x', limit: LIMIT, leaseMs: 300_000, types: ['webhook.deliver'] });
  const slotsCapture = capture();
  await claimJobs(slotsCapture, {
    workerId: 'explain:1:x',
    limit: LIMIT,
    leaseMs: 300_000,
    types: ['webhook.deliver'],
    plan: { workers: 0, deliveries: LIMIT, total: LIMIT, endpoints: new Map([['default', LIMIT]]) },
  });

  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const explain = async (title, stmt, mode) => {
    await client.query('begin');
    try {
      await client.query(`set local plan_cache_mode = ${mode}`);
      await client.query(`prepare p as ${stmt.text}`);
      const args = stmt.values.map((v) => client.escapeLiteral(Array.isArray(v) ? toPgArray(v) : v === null ? null : String(v)));
      const r = await client.query(
        `explain (analyze, buffers, costs off, timing on) execute p(${args.map((a) => (a === "'null'" ? 'null' : a)).join(', ')})`,
      );
      console.log(`\n=== ${title} (${mode})\n${r.rows.map((x) => x['QUERY PLAN']).join('\n')}`);
    } finally {
      await client.query('rollback');
      await client.query('deallocate all');
    }
  };
  for (const mode of ['force_custom_plan', 'force_generic_plan']) {
    await explain(`claim ${LIMIT} (acw_claim)`, claimCapture.seen[0], mode);
    await explain(`claim ${LIMIT} with endpoint slots (acw_claim_slots)`, slotsCapture.seen[0], mode);
  }
  // Complete: claim for real first, then explain completing what was claimed.
  const held = await claimJobs(pool, { workerId: 'explain:1:x', limit: LIMIT, leaseMs: 300_000, types: ['webhook.deliver'] });
  const completeCapture = capture();
  const attempt = {
    attempt: 1,
    endpoint: 'default',
    statusCode: 200,
    errorKind: null,
    error: null,
    durationMs: 2,
    responseBody: 'ok',
    aborted: false,
  };
  await completeJobs(
    completeCapture,
    held.map((j) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, attempt })),
  );
  for (const mode of ['force_custom_plan', 'force_generic_plan'])
    await explain(`complete ${held.length} with attempt rows (acw_complete_att)`, completeCapture.seen[0], mode);
  await client.end();
  await pool.end();
} finally {
  await server.stop();
}

function toPgArray(a) {
  return `{${a.map((x) => (x === null ? 'NULL' : `"${String(x).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`)).join(',')}}`;
}
