// The ordered scenario's failing-key figure (issue 29's second target): events on `keys` ordering
// keys at a steady gap through the outbox, latency from just before the notify to the receiver's
// arrival, in two phases of one run: a baseline, then the same load while the receiver answers 500
// to one more key for `failMs`. The other keys' p95 should stay within 2x of the baseline: a
// failing key delays only itself.
import { loadavg } from 'node:os';
import pg from 'pg';
import { TOPIC, eventData, percentile, sleep, wallNow } from './common.mjs';
import { dist } from './dist.mjs';
import { round } from './report.mjs';
import { label, SYSTEMS } from '../systems/index.mjs';

const FAILING = 'failing';

/** One phase: `n` events, every `every`th on `spare` (the failing key, or a healthy one in the baseline). */
async function phase(ctx, notify, client, { n, gapMs, keys, every, spare, failMs }) {
  const { receiver } = ctx;
  await receiver.reset({ latency: true, ...(spare === FAILING ? { failKey: FAILING, failMs } : {}) });
  const load = loadavg()[0];
  const sent = new Float64Array(n);
  const keyOf = (i) => (i % every === 0 ? spare : `k${i % keys}`);
  const start = wallNow() + 5;
  for (let i = 0; i < n; i++) {
    const wait = start + i * gapMs - wallNow();
    if (wait > 0.5) await sleep(wait);
    sent[i] = wallNow();
    await notify(client, TOPIC, eventData(i), { orderingKey: keyOf(i) });
  }
  // The other keys' events all arrive, or 30 s pass.
  const others = Array.from({ length: n }, (_, i) => i).filter((i) => keyOf(i) !== spare).length;
  const deadline = wallNow() + 30_000;
  let st;
  for (;;) {
    st = await ctx.receiver.stats(true);
    const got = st.arrivals.filter(([seq]) => keyOf(seq) !== spare).length;
    if (got >= others || wallNow() > deadline) break;
    await sleep(250);
  }
  const lat = st.arrivals
    .filter(([seq]) => keyOf(seq) !== spare)
    .map(([seq, at]) => at - sent[seq])
    .toSorted((a, b) => a - b);
  return {
    events: n,
    other_events: others,
    other_received: lat.length,
    other_p50_ms: round(percentile(lat, 50), 2),
    other_p95_ms: round(percentile(lat, 95), 2),
    other_max_ms: round(lat.at(-1), 2),
    spare_received: st.arrivals.length - lat.length,
    answered_500: st.failed ?? 0,
    load_1m: round(load, 1),
  };
}

export async function runFailingKey(ctx, key, run, { keys, failMs, gapMs, every }) {
  const { server, receiver } = ctx;
  const { mod, variant } = SYSTEMS[key];
  const db = `b_${key.replace('-', '_')}_ordered_failing_${run}`.toLowerCase();
  const url = await server.createDatabase(db, await ctx.template(key, false));
  await ctx.experimentSettings(mod, db);
  const w = ctx.workerChild({ system: mod.name, variant, mode: 'deliver', url, receiverUrl: receiver.url, target: Infinity });
  const client = new pg.Client({ connectionString: url });
  try {
    await w.wait('loaded', 60_000);
    w.send({ cmd: 'go' });
    await w.wait('started', 60_000);
    const { notify } = await dist('outbox.js');
    await client.connect();
    await sleep(1_500); // workers idle, listeners connected
    const n = Math.max(1, Math.round(failMs / gapMs));
    const base = await phase(ctx, notify, client, { n, gapMs, keys, every, spare: 'spare', failMs });
    const failing = await phase(ctx, notify, client, { n, gapMs, keys, every, spare: FAILING, failMs });
    const r = {
      scenario: 'ordered',
      figure: 'failing-key',
      system: key,
      label: label(key),
      run,
      failing_keys: keys,
      fail_ms: failMs,
      gap_ms: gapMs,
      baseline: base,
      failing,
      other_p95_of_baseline: base.other_p95_ms > 0 ? round(failing.other_p95_ms / base.other_p95_ms, 2) : null,
    };
    ctx.emit(r);
    return r;
  } finally {
    await client.end().catch(() => undefined);
    await ctx.stopChild(w);
    await server.dropDatabase(db);
  }
}
