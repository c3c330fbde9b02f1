// noop: as deliver, with a handler that does nothing (bench/README.md#scenarios).
import { runThroughput } from '../lib/throughput.mjs';
import { coreReport } from '../reports/core.mjs';
import { ALL } from '../systems/index.mjs';

export default {
  name: 'noop',
  systems: ALL,
  run: (ctx, key, run) => runThroughput(ctx, 'noop', key, run),
  report: coreReport,
};
