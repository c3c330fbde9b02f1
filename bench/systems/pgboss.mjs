// pg-boss 10.4.2 (its last release for Node 20), through its API: `insert` (batches) and `send`
// to enqueue, `work()` with batchSize/pollingIntervalSeconds to work. pg-boss 10 has no LISTEN:
// workers find jobs by polling, so its latency is about half the polling interval.
import pg from 'pg';
import { fleetPeerPayload, makeSignedPoster, peerPayload } from '../lib/common.mjs';

export const name = 'pgboss';
const SCHEMA = 'pgboss';

/**
 * tuned: batches of 200 per fetch, polling every 0.5 s, and `workers` work() subscriptions (its
 * docs: "each call to work() will add a new worker"; one worker fetches at most one batch per
 * polling interval, so one alone tops out at 200 / 0.5 s = 400 jobs/s). Everything else as shipped.
 */
export const variants = {
  tuned: {
    label: 'pg-boss tuned',
    workers: process.env.BENCH_PGBOSS_WORKERS ? Number(process.env.BENCH_PGBOSS_WORKERS) : 12,
    work: { batchSize: 200, pollingIntervalSeconds: 0.5 },
  },
};

export function describe(variant) {
  return `${variants[variant].workers} x work() with batchSize 200 (each batch POSTed concurrently), pollingIntervalSeconds 0.5; fleet: concurrency x work() with batchSize 1`;
}

/**
 * The fleet scenario at concurrency C: C work() subscriptions with batchSize 1, polling every 0.5 s.
 * pg-boss 10 completes or fails a fetched batch as a whole and waits for its slowest job, so one
 * hanging or failing job in a batch would hold or retry all of it; with batches of one, every job
 * retries on its own and a hang holds one of C slots, which is what concurrency means for the others.
 */
const FLEET_WORK = { batchSize: 1, pollingIntervalSeconds: 0.5 };

async function boss(url, extra = {}) {
  const { default: PgBoss } = await import('pg-boss');
  const b = new PgBoss({ connectionString: url, ...extra });
  b.on('error', (e) => console.error('pg-boss error:', e.message));
  await b.start();
  return b;
}

// An enqueuing client: no maintenance, no cron, schema as migrated.
const CLIENT_OPTS = { supervise: false, schedule: false, migrate: false, max: 2 };

// ---------------------------------------------------------------- orchestrator side

export async function createTemplate(server, db, { backlog } = {}) {
  const url = await server.createDatabase(db);
  const b = await boss(url, { supervise: false, schedule: false });
  try {
    await b.createQueue('deliver');
    await b.createQueue('noop');
  } finally {
    await b.stop({ graceful: false, wait: true });
  }
  if (!backlog) return;
  // pg-boss keeps completed jobs in `job` until its maintenance archives them (after 12 h by
  // default): a busy queue's history. Completed within the last 10 h, so none is archived now.
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const data = `jsonb_build_object('topic', 'order.paid', 'body', '{"event_id":"' || gen_random_uuid() || '","topic":"order.paid","occurred_at":"2026-01-01T00:00:00.000Z","data":{"seq":' || g || ',"order_id":"ord_' || lpad(g::text, 8, '0') || '","amount_cents":2500,"currency":"EUR","customer":{"id":"cus_1","email":"customer1@example.com"},"items":2}}')`;
    for (let lo = 1; lo <= backlog.completed; lo += 200_000) {
      const hi = Math.min(backlog.completed, lo + 199_999);
      await c.query(
        `insert into ${SCHEMA}.job (name, data, state, start_after, started_on, created_on, completed_on, policy)
         select 'deliver', ${data}, 'completed', t, t, t, t + interval '40 ms', 'standard'
         from (select g, now() - (g % 36000) * interval '1 second' as t from generate_series($1::int, $2::int) g) s`,
        [lo, hi],
      );
    }
    await c.query(
      `insert into ${SCHEMA}.job (name, data, state, start_after, policy)
       select 'deliver', ${data}, 'created', now() + interval '1 day' + (g % 3600) * interval '1 second', 'standard'
       from generate_series(1, $1::int) g`,
      [backlog.future],
    );
    await c.query('vacuum (freeze, analyze)');
  } finally {
    await c.end();
  }
}

export async function enqueue(url, { mode, n, batch = 1000, fleet }) {
  const b = await boss(url, CLIENT_OPTS);
  try {
    const queue = mode === 'noop' ? 'noop' : 'deliver';
    const t0 = performance.now();
    for (let i = 0; i < n; i += batch) {
      const jobs = [];
      for (let k = i; k < Math.min(n, i + batch); k++) {
        jobs.push({
          name: queue,
          data: mode === 'noop' ? { seq: k } : mode === 'fleet' ? fleetPeerPayload(k, fleet.endpoints) : peerPayload(k),
        });
      }
      await b.insert(jobs);
    }
    return { ms: performance.now() - t0, ctx: { queue } };
  } finally {
    await b.stop({ graceful: false, wait: true });
  }
}

/** Done when no job of the queue is created/retry/active (the future backlog excluded). */
export async function isDone(client, ctx) {
  const r = await client.query(
    `select not exists (select 1 from ${SCHEMA}.job where name = $1 and state < 'completed' and start_after < now() + interval '1 hour') as done`,
    [ctx.queue],
  );
  return r.rows[0].done;
}

/**
 * pg-boss records when each job completed: the run ends at the last `completed_on` (the time of
 * the completing statement), so its finish is not blurred by how long our done-check takes.
 */
export async function endTime(client, ctx, { since }) {
  const r = await client.query(
    `select extract(epoch from max(completed_on)) * 1000 as t from ${SCHEMA}.job
     where name = $1 and state = 'completed' and completed_on >= to_timestamp($2 / 1000.0)`,
    [ctx.queue, since],
  );
  return r.rows[0].t === null ? null : Number(r.rows[0].t);
}

export async function verify(client, { since }, ctx) {
  const r = await client.query(
    `select count(*) filter (where state = 'completed' and completed_on >= to_timestamp($2 / 1000.0))::int as completed,
            count(*) filter (where state in ('failed', 'retry'))::int as failed
     from ${SCHEMA}.job where name = $1`,
    [ctx.queue, since],
  );
  return r.rows[0];
}

export async function openLatency(url) {
  const b = await boss(url, CLIENT_OPTS);
  return {
    enqueue: (seq) => b.send('deliver', peerPayload(seq)),
    close: () => b.stop({ graceful: false, wait: true }),
  };
}

/** The fleet's steady phase: `send` on a pg-boss client with a pool of `connections`. */
export async function openFleet(url, { fleet, connections }) {
  const b = await boss(url, { ...CLIENT_OPTS, max: connections });
  return {
    enqueue: (seq) => b.send('deliver', fleetPeerPayload(seq, fleet.endpoints)),
    close: () => b.stop({ graceful: false, wait: true }),
  };
}

// ---------------------------------------------------------------- worker side

export async function prepareWorker({ url, receiverUrl, variant, mode, onHandled, concurrency }) {
  const { default: PgBoss } = await import('pg-boss');
  // Fleet: one socket per job in flight at most (all endpoints share the receiver's origin).
  const poster = await makeSignedPoster(receiverUrl, mode === 'fleet' ? { connections: Math.max(64, concurrency) } : {});
  const { work: opts, workers } = variants[variant];
  let b = null;
  return {
    async start() {
      b = new PgBoss({ connectionString: url });
      b.on('error', (e) => console.error('pg-boss error:', e.message));
      await b.start();
      if (mode === 'fleet') {
        // A non-2xx or a timeout throws, so pg-boss fails the job and retries it (its default retryLimit 2, no delay).
        for (let i = 0; i < concurrency; i++) await b.work('deliver', FLEET_WORK, async ([job]) => poster.post(job.id, job.data));
        return;
      }
      for (let i = 0; i < workers; i++) {
        if (mode === 'noop') {
          await b.work('noop', opts, async (jobs) => void onHandled(jobs.length));
        } else {
          await b.work('deliver', opts, async (jobs) => {
            await Promise.all(jobs.map((j) => poster.post(j.id, j.data)));
          });
        }
      }
    },
    async stop() {
      await b?.stop({ graceful: true, wait: true, timeout: 5_000 });
      await poster.close();
    },
  };
}
