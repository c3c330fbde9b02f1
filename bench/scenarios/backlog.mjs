// backlog: deliver again with history already in the table (BENCH_BACKLOG_COMPLETED finished and
// BENCH_BACKLOG_FUTURE future jobs in the template; bench/README.md#scenarios), and what
// PostgreSQL wrote per job with that history present.
import { runThroughput } from '../lib/throughput.mjs';
import { coreReport } from '../reports/core.mjs';

export default {
  name: 'backlog',
  systems: ['acw-default', 'acw-tuned', 'graphile-tuned', 'pgboss-tuned'],
  run: (ctx, key, run) => runThroughput(ctx, 'backlog', key, run, { pgWrites: true }),
  report: coreReport,
};
