// graphile-worker 0.17.3 (its last release for Node 20), through its library API: WorkerUtils
// `addJobs` / `addJob` to enqueue, `run()` with a task list to work.
import pg from 'pg';
import { fleetPeerPayload, makeSignedPoster, peerPayload } from '../lib/common.mjs';

export const name = 'graphile';
const SCHEMA = 'graphile_worker';

/**
 * default: the library's defaults (concurrentJobs 1, maxPoolSize 10, no local queue, no batched
 * completion). tuned: the configuration of its performance page
 * (https://worker.graphile.org/docs/performance: concurrentJobs 24, maxPoolSize 25,
 * completeJobBatchDelay 0, failJobBatchDelay 0) with localQueue.size 200.
 */
export const variants = {
  default: { label: 'graphile-worker default', options: {} },
  tuned: {
    label: 'graphile-worker tuned',
    options: {
      concurrency: 24,
      maxPoolSize: 25,
      preset: { worker: { localQueue: { size: 200 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
    },
  },
};

export function describe(variant) {
  return variant === 'tuned'
    ? 'concurrency 24, maxPoolSize 25, localQueue.size 200, completeJobBatchDelay 0, failJobBatchDelay 0; fleet: concurrency C, localQueue.size max(200, C)'
    : 'library defaults: concurrency 1, maxPoolSize 10';
}

/**
 * WorkerUtils on a pool of our own, with error listeners: its connections can outlive release()
 * (seen under load), and creating a database from the template (or dropping a run database) then
 * terminates them, which crashed the orchestrator on the idle client's unhandled error.
 */
async function utils(url, { maxPoolSize = 10 } = {}) {
  const { makeWorkerUtils } = await import('graphile-worker');
  const pool = new pg.Pool({ connectionString: url, max: maxPoolSize });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  const u = await makeWorkerUtils({ pgPool: pool, logger: await quietLogger() });
  return {
    migrate: () => u.migrate(),
    addJob: (...a) => u.addJob(...a),
    addJobs: (...a) => u.addJobs(...a),
    withPgClient: (f) => u.withPgClient(f),
    async release() {
      await u.release();
      await pool.end();
    },
  };
}

/**
 * The fleet scenario runs the tuned configuration at `concurrency` 50 or 500, with the local queue
 * at least that large (graphile warns when it is smaller than the concurrency).
 */
function fleetOptions(variant, concurrency) {
  const o = variants[variant].options;
  return {
    ...o,
    concurrency,
    preset: { worker: { ...o.preset?.worker, localQueue: { size: Math.max(o.preset?.worker?.localQueue?.size ?? 0, concurrency) } } },
  };
}

async function quietLogger() {
  const { Logger } = await import('graphile-worker');
  return new Logger(() => () => undefined);
}

// ---------------------------------------------------------------- orchestrator side

export async function createTemplate(server, db, { backlog } = {}) {
  const url = await server.createDatabase(db);
  const u = await utils(url);
  try {
    await u.migrate();
    // graphile-worker deletes a job when it completes: there are no completed rows to pile up,
    // so its backlog is the future-scheduled jobs only.
    if (backlog) {
      const runAt = new Date(Date.now() + 86_400_000);
      for (let i = 0; i < backlog.future; i += 5000) {
        const specs = [];
        for (let k = i; k < Math.min(backlog.future, i + 5000); k++) {
          specs.push({ identifier: 'deliver', payload: peerPayload(k), runAt: new Date(runAt.getTime() + (k % 3600) * 1000) });
        }
        await u.addJobs(specs);
      }
    }
  } finally {
    await u.release();
  }
  if (backlog) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('vacuum (freeze, analyze)');
    await c.end();
  }
}

export async function enqueue(url, { mode, n, batch = 1000, fleet }) {
  const u = await utils(url);
  try {
    const identifier = mode === 'noop' ? 'noop' : 'deliver';
    // Warm the pool (as our enqueue warms its client) so the clock measures inserts.
    await u.withPgClient((c) => c.query('select 1'));
    const t0 = performance.now();
    for (let i = 0; i < n; i += batch) {
      const specs = [];
      for (let k = i; k < Math.min(n, i + batch); k++) {
        const payload = mode === 'noop' ? { seq: k } : mode === 'fleet' ? fleetPeerPayload(k, fleet.endpoints) : peerPayload(k);
        specs.push({ identifier, payload });
      }
      await u.addJobs(specs);
    }
    const ms = performance.now() - t0;
    const r = await u.withPgClient((c) =>
      c.query(`select min(id)::text as lo, max(id)::text as hi from ${SCHEMA}._private_jobs where run_at < now() + interval '1 hour'`),
    );
    return { ms, ctx: { lo: r.rows[0].lo, hi: r.rows[0].hi } };
  } finally {
    await u.release();
  }
}

/** Completed jobs are deleted: done when none of this run's ids is left (a primary-key range probe). */
export async function isDone(client, ctx) {
  const r = await client.query(`select not exists (select 1 from ${SCHEMA}._private_jobs where id between $1 and $2) as done`, [
    ctx.lo,
    ctx.hi,
  ]);
  return r.rows[0].done;
}

export async function verify(client) {
  const r = await client.query(`select count(*)::int as n from ${SCHEMA}._private_jobs where last_error is not null`);
  return { failed_rows: r.rows[0].n };
}

export async function openLatency(url) {
  const u = await utils(url);
  await u.withPgClient((c) => c.query('select 1'));
  return {
    enqueue: (seq) => u.addJob('deliver', peerPayload(seq)),
    close: () => u.release(),
  };
}

/** The fleet's steady phase: `addJob` through WorkerUtils with a pool of `connections`. */
export async function openFleet(url, { fleet, connections }) {
  const u = await utils(url, { maxPoolSize: connections });
  await Promise.all(Array.from({ length: connections }, () => u.withPgClient((c) => c.query('select 1'))));
  return {
    enqueue: (seq) => u.addJob('deliver', fleetPeerPayload(seq, fleet.endpoints)),
    close: () => u.release(),
  };
}

// ---------------------------------------------------------------- worker side

export async function prepareWorker({ url, receiverUrl, variant, mode, onHandled, concurrency }) {
  const { run } = await import('graphile-worker');
  // Fleet: one socket per job in flight at most, so no job waits for a local connection (all
  // endpoints share the receiver's origin).
  const poster = await makeSignedPoster(receiverUrl, mode === 'fleet' ? { connections: Math.max(64, concurrency) } : {});
  const options = mode === 'fleet' ? fleetOptions(variant, concurrency) : variants[variant].options;
  const taskList =
    mode === 'noop'
      ? { noop: async () => void onHandled(1) }
      : { deliver: async (payload, helpers) => poster.post(helpers.job.id, payload) };
  let runner = null;
  return {
    async start() {
      // Its default console logger (per-job "Completed task" lines at info), to stdout = /dev/null.
      runner = await run({ connectionString: url, noHandleSignals: true, taskList, ...options });
    },
    async stop() {
      await runner?.stop();
      await poster.close();
    },
  };
}
