// ceiling: the no-queue bounds (bench/README.md#scenarios): the signed POSTs alone at acw tuned's
// concurrency, and acw's own claim/complete SQL in batches of 200, 1, 2 or 4 loops at once, with
// and without attempt rows. Each measured in a ceiling.mjs child.
import { N } from '../lib/env.mjs';
import { round } from '../lib/report.mjs';
import { CEILING_CONCURRENCY, coreReport } from '../reports/core.mjs';

async function runCeilingChild(ctx, cfg) {
  const c = ctx.spawn('ceiling.mjs', { envVar: 'BENCH_CEILING', cfg });
  try {
    await c.wait('loaded', 300_000);
    await ctx.server.checkpoint();
    c.send({ cmd: 'go' });
    return await c.wait('done', 600_000);
  } finally {
    if (!c.exit) await c.kill();
  }
}

async function runCeiling(ctx, _key, run) {
  const { server, receiver } = ctx;
  ctx.note(`ceiling run ${run}`);
  await receiver.reset({ target: Infinity });
  const h = await runCeilingChild(ctx, { mode: 'http', n: N, concurrency: CEILING_CONCURRENCY, receiverUrl: receiver.url });
  const st = await receiver.stats();
  ctx.emit({
    scenario: 'ceiling',
    kind: 'http',
    run,
    jobs: N,
    concurrency: CEILING_CONCURRENCY,
    jobs_per_s: round(h.n / (h.ms / 1000), 0),
    received: st.count,
    bad_signatures: st.badSignatures,
  });
  for (const attempts of [true, false]) {
    for (const loops of [1, 2, 4]) {
      const db = `b_ceiling_pg_${run}_${loops}_${attempts ? 'att' : 'noatt'}`;
      const url = await server.createDatabase(db, await ctx.template('acw-tuned', false));
      try {
        const p = await runCeilingChild(ctx, { mode: 'pg', url, n: N, batch: 200, loops, attempts });
        ctx.emit({
          scenario: 'ceiling',
          kind: 'pg',
          run,
          jobs: p.n,
          batch: 200,
          loops,
          attempts,
          jobs_per_s: round(p.n / (p.ms / 1000), 0),
        });
      } finally {
        await server.dropDatabase(db);
      }
    }
  }
}

export default { name: 'ceiling', run: runCeiling, report: coreReport };
