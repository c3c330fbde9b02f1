/**
 * The caller's trace context, for the library entry points (`notify(db, …)`, `acw-webhooks/client`):
 * read through `@opentelemetry/api` (a peer dependency: the application's copy, whose registered
 * context manager and tracer provider are the ones that count), imported on first use. Without a
 * span active, or without the package, there is none.
 */
import type * as Api from '@opentelemetry/api';
import type { TraceCarrier } from './carrier.js';

let api: Promise<typeof Api | null> | undefined;

function loadApi(): Promise<typeof Api | null> {
  api ??= import('@opentelemetry/api').catch(() => null);
  return api;
}

function carrierOf(a: typeof Api, sc: Api.SpanContext | undefined): TraceCarrier | undefined {
  if (!sc || !a.isSpanContextValid(sc)) return undefined;
  const traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  const tracestate = sc.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/** The active span's context, as the client sends it. */
export async function activeCarrier(): Promise<TraceCarrier | undefined> {
  const a = await loadApi();
  return a ? carrierOf(a, a.trace.getSpanContext(a.context.active())) : undefined;
}

/**
 * Run `fn` inside a producer span of the application's tracer, given that span's context to store
 * with the events. With no tracer provider registered the span is the API's no-op one: it carries
 * the active context on, and with none active there is nothing to store.
 */
export async function producing<T>(
  attrs: { topic?: string; events: number },
  fn: (carrier: TraceCarrier | undefined) => Promise<T>,
): Promise<T> {
  const a = await loadApi();
  if (!a) return fn(undefined);
  const parent = a.context.active();
  const span = a.trace.getTracer('acw-webhooks').startSpan(
    attrs.topic ? `send ${attrs.topic}` : 'send',
    {
      kind: a.SpanKind.PRODUCER,
      attributes: {
        'messaging.system': 'acw-webhooks',
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'notify',
        ...(attrs.topic ? { 'messaging.destination.name': attrs.topic } : {}),
        ...(attrs.events > 1 ? { 'messaging.batch.message_count': attrs.events } : {}),
      },
    },
    parent,
  );
  try {
    return await a.context.with(a.trace.setSpan(parent, span), () => fn(carrierOf(a, span.spanContext())));
  } catch (err) {
    span.setStatus({ code: a.SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}
