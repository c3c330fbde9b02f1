// http-latency: acw's POST /v1/notify to a `serve` with jobs off while a separate worker delivers,
// against the peers' addJob (bench/README.md#http-entry-point).
import { httpMeta } from '../lib/env.mjs';
import { runLatency } from '../lib/latency.mjs';
import { httpReport } from '../reports/http.mjs';

export default {
  name: 'http-latency',
  systems: ['acw-default', 'graphile-tuned', 'graphile-default'],
  run: (ctx, key, run) => runLatency(ctx, key, key.startsWith('acw') ? 'http' : 'addJob', run, 'http-latency'),
  report: httpReport,
  meta: httpMeta,
};
