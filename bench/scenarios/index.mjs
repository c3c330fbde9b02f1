// Every scenario, in the order `BENCH_SCENARIOS` runs them by default. Adding one is a module in
// this folder and a line here (bench/README.md#adding-a-scenario).
//
// A scenario is { name, systems?, run(ctx, key, run), report?, meta? }:
//   systems  the system keys it runs for, once each per run (filtered by BENCH_SYSTEMS); without
//            it, run() is called once per run with key null and picks its own columns (ctx.only);
//   run      one run: measure, then ctx.emit() one JSON line per figure (lib/harness.mjs has ctx);
//   report   (results, meta) => { md, json }: its section of latest.md (null when it did not run)
//            and its keys in latest.json. Scenarios that share a table share a report (reports/);
//   meta     () => object: its knobs, merged into the meta line when it is selected.
import backlog from './backlog.mjs';
import ceiling from './ceiling.mjs';
import deliver from './deliver.mjs';
import fleet from './fleet.mjs';
import httpBatch from './http-batch.mjs';
import httpLatency from './http-latency.mjs';
import history from './history.mjs';
import httpRps from './http-rps.mjs';
import latency from './latency.mjs';
import noop from './noop.mjs';
import ordered from './ordered.mjs';
import slowEndpoints from './slow-endpoints.mjs';
import tracing from './tracing.mjs';
import topicValidation from './topic-validation.mjs';

export const SCENARIOS = [
  ceiling,
  deliver,
  noop,
  latency,
  httpBatch,
  httpLatency,
  httpRps,
  backlog,
  fleet,
  slowEndpoints,
  history,
  tracing,
  topicValidation,
  ordered,
];

/** The reports of every scenario, each once, in the order their sections appear in latest.md. */
export const REPORTS = [...new Set(SCENARIOS.map((s) => s.report).filter(Boolean))];
