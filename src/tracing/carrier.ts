/**
 * The W3C trace context as stored with an event and each of its jobs (docs/operations.md#tracing):
 * `traceparent` and `tracestate` as text. Pure string work: nothing of OpenTelemetry is loaded here.
 */

export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** Version 00, a trace id and a span id that are not all zeros, two hex digits of flags (W3C Trace Context). */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
/** The longest tracestate kept; W3C allows 32 members, and no member passes 256 characters. */
export const TRACESTATE_MAX = 512;

export function isTraceparent(s: unknown): s is string {
  return typeof s === 'string' && TRACEPARENT.test(s);
}

/**
 * The carrier of a request's headers, or undefined: an invalid traceparent is ignored (as W3C
 * asks of a receiver), and so is a tracestate without one or too long to keep.
 */
export function carrierOf(traceparent: unknown, tracestate: unknown): TraceCarrier | undefined {
  const tp = Array.isArray(traceparent) ? traceparent[0] : traceparent;
  if (!isTraceparent(tp)) return undefined;
  const ts = Array.isArray(tracestate) ? tracestate.join(',') : tracestate;
  return typeof ts === 'string' && ts !== '' && ts.length <= TRACESTATE_MAX ? { traceparent: tp, tracestate: ts } : { traceparent: tp };
}

/** Whether the carrier's trace was sampled (flag 01). */
export function isSampled(c: TraceCarrier): boolean {
  return (Number.parseInt(c.traceparent.slice(53, 55), 16) & 1) === 1;
}
