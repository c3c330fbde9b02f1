// deliver: events enqueued up front, then drained to the 1 ms receiver (bench/README.md#scenarios),
// with what PostgreSQL wrote per job (bench/README.md#postgresql-writes-per-job).
import { runThroughput } from '../lib/throughput.mjs';
import { coreReport } from '../reports/core.mjs';
import { ALL } from '../systems/index.mjs';

export default {
  name: 'deliver',
  systems: ALL,
  run: (ctx, key, run) => runThroughput(ctx, 'deliver', key, run, { pgWrites: true }),
  report: coreReport,
};
