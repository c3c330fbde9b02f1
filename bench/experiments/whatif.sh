#!/bin/bash
# What-if experiments behind the tuning notes in bench/README.md: each runs the deliver scenario for
# acw-webhooks tuned and graphile-worker tuned (2 runs) with one change applied to acw's side only.
# Usage: BENCH_DIST=file:///abs/path/to/a/build/dist/ bench/experiments/whatif.sh   (default: dist/)
cd "$(dirname "$0")/../.." || exit 1
export BENCH_SCENARIOS=${BENCH_SCENARIOS:-deliver} BENCH_SYSTEMS=${BENCH_SYSTEMS:-acw-tuned,graphile-tuned} BENCH_RUNS=${BENCH_RUNS:-2}
run() {
  name=$1; shift
  env "$@" node bench/run.mjs 2>/dev/null | grep '"scenario":"deliver"' | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    print('$name', r['system'], r['run'], r['jobs_per_s'], r['peak_rss_mb'], r['mem_peak_mb'], r['cpu_s'], flush=True)
"
}
run A-baseline X=1
run B-drop-operator-indexes BENCH_ACW_DB_SQL="drop index jobs_created_idx; drop index jobs_endpoint_created_idx; drop index webhook_attempts_endpoint_idx;"
run D1-old-space-64 BENCH_ACW_NODE_OPTIONS="--max-old-space-size=64"
run D2-semi-space-4 BENCH_ACW_NODE_OPTIONS="--max-semi-space-size=4"
run D3-old-space-96 BENCH_ACW_NODE_OPTIONS="--max-old-space-size=96"
run D4-semi-space-8 BENCH_ACW_NODE_OPTIONS="--max-semi-space-size=8"
run D5-old-80-semi-8 BENCH_ACW_NODE_OPTIONS="--max-old-space-size=80 --max-semi-space-size=8"
run E-log-warn BENCH_ACW_LOG_LEVEL=warn
