// The no-queue ceilings, in a child process like the workers:
//  - http: the same signed POSTs (lib/common.mjs makeSignedPoster) straight to the receiver at a
//    fixed concurrency: what the receiver + undici + HMAC cost without any queue;
//  - pg: acw-webhooks' own claim/complete SQL (claimJobs / completeJobs from dist), batches of
//    `batch`, `loops` claim->complete loops running at once on a pool of as many connections, so
//    one batch's claim overlaps another's complete (pipelined), with or without the attempt rows
//    a delivery writes.
// BENCH_CEILING (JSON) configures it; {type:'loaded'} / {cmd:'go'} / {type:'done', ...} over IPC.
import { randomUUID } from 'node:crypto';
import { makeSignedPoster, peerPayload } from './lib/common.mjs';
import { dist } from './lib/dist.mjs';

const cfg = JSON.parse(process.env.BENCH_CEILING ?? '{}');

async function http() {
  const poster = await makeSignedPoster(cfg.receiverUrl, { connections: Math.max(64, cfg.concurrency) });
  const payloads = Array.from({ length: cfg.n }, (_, i) => peerPayload(i));
  const ids = Array.from({ length: cfg.n }, () => randomUUID());
  return {
    async go() {
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: cfg.concurrency }, async () => {
          while (next < cfg.n) {
            const i = next++;
            await poster.post(ids[i], payloads[i]);
          }
        }),
      );
      const ms = performance.now() - t0;
      await poster.close();
      return { ms, n: cfg.n };
    },
  };
}

async function pgClaimComplete() {
  const { claimJobs, completeJobs, enqueueJobs } = await dist('queue/transitions.js');
  const { createPool } = await dist('db/pool.js');
  const pool = createPool({ url: cfg.url, size: cfg.loops + 1, schema: 'public' });
  for (let i = 0; i < cfg.n; i += 1000) {
    const jobs = [];
    for (let k = i; k < Math.min(cfg.n, i + 1000); k++)
      jobs.push({ type: 'bench.noop', payload: { seq: k }, maxAttempts: 6, endpoint: 'default' });
    await enqueueJobs(pool, jobs, 'public.bench_ceiling');
  }
  // Open every connection and prepare the statements before the clock starts.
  await Promise.all(Array.from({ length: cfg.loops }, () => pool.query('select 1')));
  const workerId = `bench:${process.pid}:ceiling`;
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
  return {
    async go() {
      let done = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: cfg.loops }, async () => {
          for (;;) {
            const jobs = await claimJobs(pool, { workerId, limit: cfg.batch, leaseMs: 300_000, types: ['bench.noop'] });
            if (jobs.length === 0) return;
            await completeJobs(
              pool,
              jobs.map((j) => ({ leased: { id: j.id, leaseToken: j.leaseToken }, attempt: cfg.attempts ? attempt : undefined })),
            );
            done += jobs.length;
          }
        }),
      );
      const ms = performance.now() - t0;
      await pool.end();
      return { ms, n: done };
    },
  };
}

const runner = cfg.mode === 'http' ? await http() : await pgClaimComplete();
process.on('message', (m) => {
  if (m.cmd === 'go') {
    runner.go().then(
      (r) => process.send?.({ type: 'done', ...r }, () => process.exit(0)),
      (err) => {
        console.error(err);
        process.exit(1);
      },
    );
  }
});
process.on('disconnect', () => process.exit(2));
process.send?.({ type: 'loaded' });
