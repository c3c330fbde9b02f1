// latency: idle workers, events enqueued one at a time (bench/README.md#scenarios); acw through
// its outbox and, for acw default, through its own POST /v1/notify too.
import { runLatency } from '../lib/latency.mjs';
import { coreReport } from '../reports/core.mjs';
import { ALL } from '../systems/index.mjs';

async function runOne(ctx, key, run) {
  if (key.startsWith('acw')) {
    await runLatency(ctx, key, 'outbox', run);
    if (key === 'acw-default') await runLatency(ctx, key, 'http', run);
  } else await runLatency(ctx, key, key.startsWith('pgboss') ? 'send' : 'addJob', run);
}

export default { name: 'latency', systems: ALL, run: runOne, report: coreReport };
