// The benchmark's environment knobs that every scenario shares (bench/README.md#commands). A
// scenario's own knobs live in its module (bench/scenarios/*.mjs), next to what they change.

/** A positive integer from the environment, or `d`. */
export const int = (k, d) => (process.env[k] ? Math.max(1, Math.round(Number(process.env[k]))) : d);
/** A non-negative integer from the environment, or `d`. */
export const int0 = (k, d) => (process.env[k] ? Math.max(0, Math.round(Number(process.env[k]))) : d);
/** A comma-separated list from the environment, or `d`. */
export const list = (k, d) =>
  process.env[k]
    ? process.env[k]
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : d;

export const RUNS = int('BENCH_RUNS', 3);
/** Jobs per deliver / noop / backlog run (and per ceiling run). */
export const N = int('BENCH_JOBS', 50_000);
/** The latency scenarios: events per run, and the gap between two. */
export const LAT_N = int('BENCH_LATENCY_EVENTS', 2_000);
export const LAT_GAP = Number(process.env.BENCH_LATENCY_GAP_MS ?? 10);
/** The latency scenarios: events sent (at the same gap) before the measured ones, not counted. */
export const LAT_WARM = int0('BENCH_LATENCY_WARMUP', 100);
/** Rows already in the table for the backlog scenario (its templates). */
export const BACKLOG = { completed: int('BENCH_BACKLOG_COMPLETED', 1_000_000), future: int('BENCH_BACKLOG_FUTURE', 100_000) };
export const PROFILE = Boolean(process.env.BENCH_PROFILE);
/** With BENCH_PROFILE: a heap snapshot of each worker this many seconds into its run. */
export const HEAP_SNAPSHOT_AT_S = process.env.BENCH_HEAP_SNAPSHOT_AT_S ? Number(process.env.BENCH_HEAP_SNAPSHOT_AT_S) : null;
/** A throughput run (or drain) not done by then reports the rate it reached. */
export const RUN_TIMEOUT_S = int('BENCH_RUN_TIMEOUT_S', 150);

/** The HTTP entry point's scenarios (issue 14, bench/README.md#http-entry-point), which share these. */
export const HTTP_BATCH = {
  events: int('BENCH_HTTP_BATCH_EVENTS', 20_000),
  sizes: list('BENCH_HTTP_BATCH_SIZES', ['1000', '100']).map((x) => Math.min(1000, Math.max(1, Math.round(Number(x))))),
};
export const HTTP_RPS = { clients: int('BENCH_HTTP_RPS_CLIENTS', 50), seconds: int('BENCH_HTTP_RPS_SECONDS', 10) };
/** http-latency: timestamps inside acw's children (lib/spans.mjs). */
export const SPANS = Boolean(process.env.BENCH_SPANS);
/** What the meta line says of the HTTP scenarios when one of them runs. */
export const httpMeta = () => ({ http: { batch: HTTP_BATCH, rps: HTTP_RPS, spans: SPANS } });
