// topic-validation: the cost of validating events against the topic catalog (docs/operations.md#topic-catalog).
// BENCH_TOPIC_VALIDATION_EVENTS events through POST /v1/notify/batch, 1000 a request, to a `serve`
// with jobs off whose topic has a 10-field JSON Schema, once with `topics.validation: off` and once
// with `enforce`, back to back in each run (the order alternates between runs). Beside the rates,
// the API process's and PostgreSQL's CPU per event, and the validation alone measured in this
// process (the compiled validator of the same schema over the same events).
import { performance } from 'node:perf_hooks';
import { eventData, TOPIC } from '../lib/common.mjs';
import { dist } from '../lib/dist.mjs';
import { int } from '../lib/env.mjs';
import { cpuNow, POSTGRES } from '../lib/pgstats.mjs';
import { fmt, medianWhere, perRun, ratio, round, rx, targetsMarkdown } from '../lib/report.mjs';
import { startServe } from '../lib/serve.mjs';
import { openHttp, TOKEN } from '../systems/acw.mjs';

const EVENTS = int('BENCH_TOPIC_VALIDATION_EVENTS', 20_000);
const SIZE = 1000;
const MODES = ['off', 'enforce'];

/** The bench's usual order data, two more fields: ten validated in all (customer's two included). */
const data = (seq) => ({ ...eventData(seq), channel: seq % 2 ? 'web' : 'app', paid: true });
const event = (seq) => ({ topic: TOPIC, data: data(seq) });

export const SCHEMA = {
  type: 'object',
  required: ['seq', 'order_id', 'amount_cents', 'currency', 'customer', 'items', 'channel', 'paid'],
  additionalProperties: false,
  properties: {
    seq: { type: 'integer', minimum: 0 },
    order_id: { type: 'string', pattern: '^ord_[0-9]{8}$' },
    amount_cents: { type: 'integer', minimum: 0 },
    currency: { enum: ['EUR', 'USD', 'GBP'] },
    customer: {
      type: 'object',
      required: ['id', 'email'],
      additionalProperties: false,
      properties: { id: { type: 'string', minLength: 1 }, email: { type: 'string', format: 'email' } },
    },
    items: { type: 'integer', minimum: 1, maximum: 100 },
    channel: { enum: ['web', 'app', 'pos'] },
    paid: { type: 'boolean' },
  },
};

const topicsConfig = (validation) => ({ validation, catalog: { [TOPIC]: { schema: SCHEMA, examples: [data(1)] } } });

const perEvent = (s, n) => round((s * 1e6) / n, 1);

async function runMode(ctx, mode, run) {
  const { server } = ctx;
  ctx.note(`topic-validation run ${run}: validation ${mode}`);
  const db = `b_topic_validation_${mode}_${run}`;
  const url = await server.createDatabase(db, await ctx.template('acw-default', false));
  const { c, httpUrl } = await startServe(ctx, url, `acw-topic-validation-${mode}-${run}`, { topics: topicsConfig(mode) });
  const http = await openHttp(httpUrl, { event });
  try {
    await http.batch(EVENTS, EVENTS + SIZE); // warm-up: auth, prepared statements, the compiled validator
    await server.checkpoint();
    const cpu0 = cpuNow(server, { api: c.pid, pg: POSTGRES });
    const t0 = performance.now();
    for (let i = 0; i < EVENTS; i += SIZE) await http.batch(i, Math.min(EVENTS, i + SIZE));
    const ms = performance.now() - t0;
    const cpu1 = cpuNow(server, { api: c.pid, pg: POSTGRES });
    // The check was on: under enforce an event without its fields is refused (400), under off accepted.
    const bad = await fetch(`${httpUrl}/v1/notify/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ events: [{ topic: TOPIC, data: { seq: 1 } }] }),
    });
    if (bad.status !== (mode === 'enforce' ? 400 : 202)) throw new Error(`validation ${mode}: an invalid event was answered ${bad.status}`);
    ctx.emit({
      scenario: 'topic-validation',
      system: 'acw-default',
      mode,
      run,
      events: EVENTS,
      seconds: round(ms / 1000, 3),
      events_per_s: round(EVENTS / (ms / 1000), 0),
      api_cpu_us_per_event: perEvent(cpu1.api - cpu0.api, EVENTS),
      pg_cpu_us_per_event: perEvent(cpu1.pg - cpu0.pg, EVENTS),
    });
  } finally {
    await http.close().catch(() => undefined);
    await ctx.stopChild(c);
    await server.dropDatabase(db);
  }
}

/** The check notify runs per event (src/topics/check.ts), alone, in this process: CPU microseconds per event. */
async function validationAlone(ctx, run) {
  const { checkEvents } = await dist('topics/check.js');
  const topic = {
    name: TOPIC,
    archived: false,
    deprecated: false,
    validation: null,
    versions: [{ version: 1, schema: SCHEMA, examples: [] }],
  };
  const view = { get: (n) => (n === TOPIC ? topic : undefined), topics: [topic], mode: 'enforce', requireDeclared: false };
  const batches = [];
  for (let i = 0; i < EVENTS; i += SIZE) batches.push(Array.from({ length: Math.min(SIZE, EVENTS - i) }, (_, k) => event(i + k)));
  checkEvents(view, batches[0], true); // compiles the validator once, as the service does
  const cpu0 = process.cpuUsage();
  for (const b of batches) checkEvents(view, b, true);
  const cpu = process.cpuUsage(cpu0);
  ctx.emit({
    scenario: 'topic-validation',
    system: 'validation-alone',
    run,
    events: EVENTS,
    cpu_us_per_event: round((cpu.user + cpu.system) / EVENTS, 2),
  });
}

async function runValidation(ctx, _key, run) {
  if (!ctx.only.includes('acw-default')) return;
  for (const mode of run % 2 ? MODES : MODES.toReversed()) await runMode(ctx, mode, run);
  await validationAlone(ctx, run);
}

const isOff = (r) => r.mode === 'off';
const isOn = (r) => r.mode === 'enforce';

function report(results) {
  const rs = results.filter((r) => r.scenario === 'topic-validation' && !r.skipped);
  if (rs.length === 0) return { md: null, json: { topic_validation: null } };
  const row = (f) => ({
    events_per_s: medianWhere(rs, f, 'events_per_s'),
    api: medianWhere(rs, f, 'api_cpu_us_per_event'),
    pg: medianWhere(rs, f, 'pg_cpu_us_per_event'),
  });
  const off = row(isOff);
  const on = row(isOn);
  const q = perRun(rs, isOn, isOff, 'events_per_s', (a, b) => ratio(a, b));
  const addedApi = perRun(rs, isOn, isOff, 'api_cpu_us_per_event', (a, b) => a - b);
  const alone = medianWhere(rs, (r) => r.system === 'validation-alone', 'cpu_us_per_event');
  const md = [
    `| POST /v1/notify/batch, ${fmt(SIZE)} a request, medians over runs | events/s | serve CPU µs/event | PostgreSQL CPU µs/event |`,
    '| --- | --- | --- | --- |',
    `| topics.validation off | ${fmt(off.events_per_s)} | ${fmt(off.api, 1)} | ${fmt(off.pg, 1)} |`,
    `| enforce, a 10-field schema on every event | ${fmt(on.events_per_s)} | ${fmt(on.api, 1)} | ${fmt(on.pg, 1)} |`,
    '',
    `Validation alone (the compiled validator in one process, no I/O): ${fmt(alone, 2)} µs CPU per event. ` +
      `Added serve CPU per event, enforce minus off (median of per-run differences): ${fmt(addedApi, 1)} µs.`,
    '',
  ];
  const targets = [
    {
      name: 'batch notify with enforce within 10% of off (median of per-run ratios)',
      value: rx(q),
      goal: '>= 0.90x',
      ok: q === null ? null : q >= 0.9,
    },
  ];
  return {
    md: `## Topic validation\n\n${md.join('\n')}\n${targetsMarkdown(targets)}`,
    json: {
      topic_validation: { off, enforce: on, ratio: q, added_api_cpu_us_per_event: addedApi, validation_alone_cpu_us_per_event: alone },
    },
  };
}

export default {
  name: 'topic-validation',
  run: runValidation,
  report,
  meta: () => ({ topic_validation: { events: EVENTS, batch: SIZE } }),
};
