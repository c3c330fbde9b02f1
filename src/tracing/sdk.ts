/**
 * Tracing on: the OpenTelemetry SDK, the OTLP/HTTP exporter of the configured protocol, and the
 * spans of docs/operations.md#tracing. Imported only by startTracing (src/tracing/runtime.ts).
 * Attributes carry names, ids, counts and status codes only: never a secret, token, signature,
 * header value, query string or URL credential.
 */
import {
  context,
  createTraceState,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Config } from '../config/index.js';
import { redactUrl } from '../config/index.js';
import { coerceError } from '../errors.js';
import { scrubText, setLineFields, type Logger } from '../log.js';
import { VERSION } from '../version.js';
import { carrierOf, type TraceCarrier } from './carrier.js';
import type { AttemptOutcome, AttemptSpan, Tracing } from './runtime.js';

/** Links a span keeps (the SDK's default is 128): more than an outbox dispatch batch or a dead-letter batch has. */
export const LINK_LIMIT = 1000;
const SYSTEM = 'acw-webhooks';
/** Paths that get no server span: health checks and the metrics scrape. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

function spanContextOf(c: TraceCarrier): SpanContext {
  const tp = c.traceparent;
  return {
    traceId: tp.slice(3, 35),
    spanId: tp.slice(36, 52),
    traceFlags: Number.parseInt(tp.slice(53, 55), 16),
    isRemote: true,
    ...(c.tracestate ? { traceState: createTraceState(c.tracestate) } : {}),
  };
}

export function carrierOfSpan(sc: SpanContext): TraceCarrier {
  const traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  const tracestate = sc.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/**
 * The configured sampler for traces of their own, except for a root span with links (a delivery
 * attempt, a dispatch batch, a dead letter): it is kept if and only if one of the spans it links
 * to was, so the two ends of a link are kept together. Its tracestate is its first link's.
 */
class FollowLinks implements Sampler {
  constructor(private readonly inner: Sampler) {}
  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attrs: Attributes, links: Link[]): SamplingResult {
    if (links.length === 0 || trace.getSpanContext(ctx) !== undefined)
      return this.inner.shouldSample(ctx, traceId, name, kind, attrs, links);
    const sampled = links.some((l) => (l.context.traceFlags & TraceFlags.SAMPLED) !== 0);
    const traceState = links[0]!.context.traceState;
    return {
      decision: sampled ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD,
      ...(traceState ? { traceState } : {}),
    };
  }
  toString(): string {
    return `FollowLinks{${this.inner.toString()}}`;
  }
}

function samplerOf(t: Config['tracing']): Sampler {
  const ratio = new TraceIdRatioBasedSampler(t.sampler_arg);
  const base: Record<Config['tracing']['sampler'], () => Sampler> = {
    always_on: () => new AlwaysOnSampler(),
    always_off: () => new AlwaysOffSampler(),
    traceidratio: () => ratio,
    parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
    parentbased_traceidratio: () => new ParentBasedSampler({ root: ratio }),
  };
  return new FollowLinks(base[t.sampler]());
}

async function exporterOf(t: Config['tracing'], url: string): Promise<SpanExporter> {
  const opts = { url, headers: { ...t.headers } };
  if (t.protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(opts);
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter(opts);
}

/** An error on a span: its type and scrubbed message, no stack (which may quote values). */
function recordError(span: Span, err: unknown): void {
  const e = coerceError(err);
  const message = scrubText(e.message).slice(0, 500);
  span.recordException({ name: e.name, message });
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttribute('error.type', (e as { code?: unknown }).code !== undefined ? String((e as { code?: unknown }).code) : e.name);
}

/** `fn` inside `span` under `parent`; the span ends when it settles, an error recorded on it. */
/** A producer span's attributes: a notify of `topic` (absent: of several). */
const produced = (topic: string | undefined): Attributes => ({
  'messaging.system': SYSTEM,
  'messaging.operation.type': 'send',
  'messaging.operation.name': 'notify',
  ...(topic ? { 'messaging.destination.name': topic } : {}),
});

async function within<T>(span: Span, parent: Context, fn: () => Promise<T>, after?: (r: T) => void): Promise<T> {
  try {
    const r = await context.with(trace.setSpan(parent, span), fn);
    after?.(r);
    return r;
  } catch (err) {
    recordError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** A root span linked to each carrier's span; links past LINK_LIMIT go on child spans of it, none dropped. */
function linkedRoot(
  tracer: Tracer,
  name: string,
  kind: SpanKind,
  attributes: Attributes,
  carriers: readonly (TraceCarrier | undefined)[],
): Span {
  const links: Link[] = [];
  for (const c of carriers) if (c) links.push({ context: spanContextOf(c) });
  const span = tracer.startSpan(name, { kind, attributes, links: links.slice(0, LINK_LIMIT) }, ROOT_CONTEXT);
  for (let i = LINK_LIMIT; i < links.length; i += LINK_LIMIT) {
    tracer.startSpan(`${name} links`, { links: links.slice(i, i + LINK_LIMIT) }, trace.setSpan(ROOT_CONTEXT, span)).end();
  }
  return span;
}

interface UrlAttrs {
  'server.address': string;
  'server.port': number;
  'url.full': string;
}

/** The endpoint URL as attributes: scheme, host, port and path, never its query or credentials. */
function urlAttrs(url: string): UrlAttrs {
  try {
    const u = new URL(url);
    const port = u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
    return { 'server.address': u.hostname, 'server.port': port, 'url.full': `${u.protocol}//${u.host}${u.pathname}` };
  } catch {
    return { 'server.address': '', 'server.port': 0, 'url.full': redactUrl(url).split('?')[0]! };
  }
}

export async function createTracing(t: Config['tracing'], url: string, log: Logger): Promise<Tracing> {
  const exporter = await exporterOf(t, url);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...t.resource_attributes, 'service.name': t.service_name, 'service.version': VERSION }),
    sampler: samplerOf(t),
    spanLimits: { linkCountLimit: LINK_LIMIT },
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer(SYSTEM, VERSION);
  // The active context follows async calls; an application that embeds the service may have
  // registered its own manager already, which then serves.
  const manager = new AsyncLocalStorageContextManager();
  const ownManager = context.setGlobalContextManager(manager.enable());
  if (!ownManager) manager.disable();
  setLineFields(() => {
    const sc = trace.getSpanContext(context.active());
    return sc ? { trace_id: sc.traceId, span_id: sc.spanId } : undefined;
  });
  log.info(
    {
      event: 'tracing.started',
      url: redactUrl(url),
      protocol: t.protocol,
      service_name: t.service_name,
      sampler: t.sampler,
      sampler_arg: t.sampler_arg,
    },
    'exporting traces over OTLP/HTTP',
  );

  const attempts = new WeakMap<object, { span: Span; endedAt: number }>();
  const urls = new Map<string, UrlAttrs>();

  return {
    serverHandler(handler) {
      return (req: IncomingMessage, res: ServerResponse) => {
        // Probes and scrapes every few seconds would bury the API's spans.
        if (UNTRACED.has((req.url ?? '/').split('?')[0]!)) {
          handler(req, res);
          return;
        }
        const parentCarrier = carrierOf(req.headers['traceparent'], req.headers['tracestate']);
        const parent = parentCarrier ? trace.setSpanContext(ROOT_CONTEXT, spanContextOf(parentCarrier)) : ROOT_CONTEXT;
        const method = req.method ?? 'GET';
        const span = tracer.startSpan(
          method,
          {
            kind: SpanKind.SERVER,
            attributes: { 'http.request.method': method, 'url.path': (req.url ?? '/').split('?')[0]!, 'url.scheme': 'http' },
          },
          parent,
        );
        res.once('close', () => {
          span.setAttribute('http.response.status_code', res.statusCode);
          if (res.statusCode >= 500) {
            span.setStatus({ code: SpanStatusCode.ERROR });
            span.setAttribute('error.type', String(res.statusCode));
          }
          span.end();
        });
        const ctx = trace.setSpan(parent, span);
        // The body arrives in events of the socket: bound, so the handler after it runs in the span.
        context.bind(ctx, req);
        context.bind(ctx, res);
        context.with(ctx, () => handler(req, res));
      };
    },
    route(method, route) {
      const span = trace.getActiveSpan();
      if (!span || route === '') return;
      span.setAttribute('http.route', route);
      span.updateName(`${method} ${route}`);
    },
    produce(attrs, fn, jobs) {
      const span = tracer.startSpan(attrs.topic ? `send ${attrs.topic}` : 'send', {
        kind: SpanKind.PRODUCER,
        attributes: { ...produced(attrs.topic), ...(attrs.events > 1 ? { 'messaging.batch.message_count': attrs.events } : {}) },
      });
      const carrier = carrierOfSpan(span.spanContext());
      return within(
        span,
        context.active(),
        () => fn(carrier),
        (r) => {
          const j = jobs(r);
          if (j.eventId !== undefined) span.setAttribute('messaging.message.id', j.eventId);
          span.setAttribute('acw.jobs', j.jobs);
        },
      );
    },
    produceBatch(topics, fn, written) {
      const one = topics.every((topic) => topic === topics[0]);
      const batch = tracer.startSpan(one ? `send ${topics[0]}` : 'send', {
        kind: SpanKind.PRODUCER,
        attributes: { ...produced(one ? topics[0] : undefined), 'messaging.batch.message_count': topics.length },
      });
      const parent = trace.setSpan(context.active(), batch);
      const spans: Span[] = [];
      const carriers: TraceCarrier[] = [];
      for (const topic of topics) {
        const span = tracer.startSpan(`send ${topic}`, { kind: SpanKind.PRODUCER, attributes: produced(topic) }, parent);
        spans.push(span);
        carriers.push(carrierOfSpan(span.spanContext()));
      }
      return within(
        batch,
        context.active(),
        () =>
          fn(carriers).catch((err: unknown) => {
            // A batch refused or failed wrote none of its events: each says so.
            for (const span of spans) {
              span.setStatus({ code: SpanStatusCode.ERROR, message: 'batch not written' });
              span.end();
            }
            throw err;
          }),
        (r) => {
          const w = written(r);
          let jobs = 0;
          for (let i = 0; i < spans.length; i++) {
            const e = w[i];
            if (e !== undefined) {
              spans[i]!.setAttributes({ 'messaging.message.id': e.eventId, 'acw.jobs': e.jobs });
              jobs += e.jobs;
            }
            spans[i]!.end();
          }
          batch.setAttribute('acw.jobs', jobs);
        },
      );
    },
    dispatch(carriers, fn, jobs) {
      const span = linkedRoot(
        tracer,
        'receive outbox',
        SpanKind.CONSUMER,
        {
          'messaging.system': SYSTEM,
          'messaging.operation.type': 'receive',
          'messaging.operation.name': 'dispatch',
          'messaging.destination.name': 'outbox',
          'messaging.batch.message_count': carriers.length,
        },
        carriers,
      );
      return within(span, ROOT_CONTEXT, fn, (r) => span.setAttribute('acw.jobs', jobs(r)));
    },
    claimed(startMs, count) {
      if (count === 0) return;
      tracer.startSpan('claim jobs', { startTime: startMs, attributes: { 'acw.jobs': count } }, ROOT_CONTEXT).end();
    },
    attempt(job, a) {
      let u = urls.get(a.url);
      if (u === undefined) {
        if (urls.size > 10_000) urls.clear();
        u = urlAttrs(a.url);
        urls.set(a.url, u);
      }
      const links = a.carrier ? [{ context: spanContextOf(a.carrier) }] : [];
      const span = tracer.startSpan('POST', { kind: SpanKind.CLIENT, links }, ROOT_CONTEXT);
      // Attributes only for a span that is kept (the samplers do not read them): an attempt of an
      // unsampled notify costs its ids and little more.
      if (span.isRecording()) {
        span.setAttributes({
          'http.request.method': 'POST',
          ...u,
          'acw.endpoint': a.endpoint,
          'acw.attempt': a.attempt,
          'http.request.resend_count': a.attempt - 1,
          ...(a.eventId ? { 'messaging.message.id': a.eventId } : {}),
        });
      }
      const entry = { span, endedAt: 0 };
      attempts.set(job, entry);
      const c = carrierOfSpan(span.spanContext());
      const headers: Record<string, string> = { traceparent: c.traceparent };
      if (c.tracestate) headers['tracestate'] = c.tracestate;
      return {
        headers,
        sent(status, errorKind) {
          entry.endedAt = performance.now();
          if (status !== null) span.setAttribute('http.response.status_code', status);
          if (errorKind !== null) {
            span.setAttribute('error.type', status !== null && status >= 400 ? String(status) : errorKind);
            span.setStatus({ code: SpanStatusCode.ERROR, message: errorKind });
          }
        },
      } satisfies AttemptSpan;
    },
    attemptWritten(job, outcome: AttemptOutcome, run) {
      const entry = attempts.get(job);
      if (!entry) {
        run();
        return;
      }
      attempts.delete(job);
      entry.span.setAttribute('acw.outcome', outcome);
      try {
        context.with(trace.setSpan(ROOT_CONTEXT, entry.span), run);
      } finally {
        entry.span.end(entry.endedAt || undefined);
      }
    },
    deadLetter(carriers, fn) {
      const span = linkedRoot(tracer, 'dead letter', SpanKind.INTERNAL, { 'acw.jobs': carriers.length }, carriers);
      return within(span, ROOT_CONTEXT, fn);
    },
    async shutdown() {
      setLineFields(null);
      if (ownManager) context.disable();
      await provider.shutdown();
    },
  };
}
