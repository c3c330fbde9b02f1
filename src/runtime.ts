import v8 from 'node:v8';

/**
 * How far V8 lets the old generation grow past what survived the last major collection, for the
 * long-running commands (`serve`, `worker`). A delivering process allocates fast and keeps little
 * (about 20 MB live while it delivers thousands of webhooks a second); with V8's own growth factor
 * (up to 4x, chosen from the allocation rate) its heap grew to ~100 MB of mostly garbage between
 * major collections. At 15% the peak RSS measured 123 MB instead of 157 MB for about 6% more
 * worker CPU (bench/README.md). Measured on Node 20 (V8 11.3); Node 24's V8 13 does not let the flag
 * restrain old-space growth, so there it is a harmless no-op.
 */
export const HEAP_GROWING_PERCENT = 15;

const HEAP_FLAGS = /--(?:max[-_]old[-_]space[-_]size|max[-_]heap[-_]size|max[-_]semi[-_]space[-_]size|heap[-_]growing[-_]percent)\b/;

/**
 * Apply HEAP_GROWING_PERCENT to this process unless the operator chose heap settings of their own
 * (in NODE_OPTIONS or node's arguments). V8 reads this flag at every major collection, so setting
 * it at run time works. Returns whether it was applied.
 */
export function tuneHeapForService(env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): boolean {
  if (HEAP_FLAGS.test([env.NODE_OPTIONS ?? '', ...execArgv].join(' '))) return false;
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
