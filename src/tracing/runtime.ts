/**
 * Tracing as the rest of the service sees it (docs/operations.md#tracing): `tracing` is null
 * unless it is on, so each place that makes a span costs one null check when it is off. The
 * OpenTelemetry SDK and exporter are imported (src/tracing/sdk.ts) only by startTracing, when an
 * endpoint is configured: with nothing set, no module of OpenTelemetry is loaded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config/index.js';
import { tracesUrl } from '../config/tracing.js';
import type { Logger } from '../log.js';
import type { TraceCarrier } from './carrier.js';

/** What an attempt's span is told once the POST is back. */
export interface AttemptSpan {
  /** The span's context as `traceparent` / `tracestate`, for an endpoint with propagate_trace. */
  readonly headers: Readonly<Record<string, string>>;
  /** The answer (status, or null for no answer) and what went wrong (the attempt row's error kind). */
  sent(status: number | null, errorKind: string | null): void;
}

/** The outcome an attempt span ends with, once written (docs/operations.md#tracing). */
export type AttemptOutcome = 'completed' | 'retry' | 'dead' | 'held' | 'lease_lost';

export interface Tracing {
  /** The node:http handler Fastify's server runs, each request inside its server span. */
  serverHandler(handler: (req: IncomingMessage, res: ServerResponse) => void): (req: IncomingMessage, res: ServerResponse) => void;
  /** Name the active server span after its route (`POST /v1/notify`). */
  route(method: string, route: string): void;
  /**
   * Run `fn` inside a producer span of a notify (one event, or a batch), which it gets as a carrier
   * to store with the events; `jobs` is told afterwards how many jobs were written.
   */
  produce<T>(
    attrs: { topic?: string; events: number },
    fn: (carrier: TraceCarrier | undefined) => Promise<T>,
    jobs: (result: T) => { eventId?: string; jobs: number },
  ): Promise<T>;
  /**
   * Run `fn` inside the producer span of a batch notify, with a child producer span per event
   * (`send TOPIC`): `fn` gets each event's carrier, in input order, to store with that event;
   * `written` is told afterwards each event's id and jobs, in the same order.
   */
  produceBatch<T>(
    topics: readonly string[],
    fn: (carriers: readonly TraceCarrier[]) => Promise<T>,
    written: (result: T) => readonly { eventId: string; jobs: number }[],
  ): Promise<T>;
  /** Run `fn` inside a span of one outbox dispatch batch, linked to each event's producer. */
  dispatch<T>(carriers: readonly (TraceCarrier | undefined)[], fn: () => Promise<T>, jobs: (result: T) => number): Promise<T>;
  /** A claim batch took `startMs` to now and brought `count` jobs (a span only when it brought some). */
  claimed(startMs: number, count: number): void;
  /** The span of one delivery attempt: its own trace, linked to (and sampled as) its producer. */
  attempt(
    job: object,
    a: { carrier: TraceCarrier | undefined; endpoint: string; url: string; attempt: number; eventId: string | null },
  ): AttemptSpan;
  /** The attempt of `job` was written with this outcome: its span ends. */
  attemptWritten(job: object, outcome: AttemptOutcome, run: () => void): void;
  /** Run `fn` (the dead-letter fan-out) inside a span, linked to the dead jobs' producers. */
  deadLetter<T>(carriers: readonly (TraceCarrier | undefined)[], fn: () => Promise<T>): Promise<T>;
  /** Export what is left and stop. */
  shutdown(): Promise<void>;
}

/** The process's tracing, or null: off. */
export let tracing: Tracing | null = null;
let owner: object | null = null;

/**
 * Start tracing for `who` (a service) if the config (with the OTEL_* variables over it) names an
 * endpoint; logs the effective settings, masked, either way. One tracing per process: a second
 * service in the same process shares the first one's.
 */
export async function startTracing(who: object, cfg: Config, log: Logger): Promise<void> {
  const url = tracesUrl(cfg.tracing);
  if (url === null) {
    log.debug({ event: 'tracing.off' }, 'tracing is off: no OTLP endpoint is set (docs/operations.md#tracing)');
    return;
  }
  if (tracing !== null) return;
  const { createTracing } = await import('./sdk.js');
  tracing = await createTracing(cfg.tracing, url, log);
  owner = who;
}

/** Stop the tracing `who` started (flushing what is left); another owner's is left alone. */
export async function stopTracing(who: object): Promise<void> {
  if (owner !== who || tracing === null) return;
  const t = tracing;
  tracing = null;
  owner = null;
  await t.shutdown();
}
