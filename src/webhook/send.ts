import { Agent, request, type Dispatcher } from 'undici';
import { classifyError, classifyResponse, type AttemptOutcome } from './classify.js';

/** How much of a response body is kept (for the attempts table and logs). */
export const RESPONSE_BODY_LIMIT = 4096;

export interface SendOptions {
  /** Use `createDeliveryAgent()`; it must not carry a redirect interceptor. */
  dispatcher: Dispatcher;
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Budget for the whole attempt: connect, request, response headers and the body read. */
  timeoutMs: number;
  /** Aborted on worker shutdown or lease loss; reported as errorKind 'aborted'. */
  signal?: AbortSignal;
}

export interface SendResult {
  outcome: AttemptOutcome;
  durationMs: number;
  /** The first 4 KiB of the response body, utf8, NUL bytes removed (PostgreSQL text cannot hold them). */
  responseBody: string;
}

class AttemptTimeoutError extends Error {
  override name = 'TimeoutError';
  constructor(timeoutMs: number) {
    super(`no complete response within ${timeoutMs} ms`);
  }
}

/** One POST attempt. Never throws: every failure becomes an outcome. */
export async function sendWebhook(opts: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);
  const caller = opts.signal;
  if (caller?.aborted) {
    return { outcome: abortedOutcome(caller.reason), durationMs: 0, responseBody: '' };
  }

  // One controller for both causes; a listener (removed afterwards) rather than AbortSignal.any,
  // whose signals have leaked when combined with a long-lived one on Node 20.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new AttemptTimeoutError(opts.timeoutMs));
  }, opts.timeoutMs);
  const onCallerAbort = (): void => controller.abort(caller?.reason);
  caller?.addEventListener('abort', onCallerAbort, { once: true });

  let status: number | undefined;
  let responseBody = '';
  const chunks: Buffer[] = [];
  try {
    const res = await request(opts.url, {
      dispatcher: opts.dispatcher,
      method: 'POST',
      headers: opts.headers,
      body: opts.body,
      signal: controller.signal,
      // Never a reason to retry silently: a webhook POST is not idempotent for the receiver.
      idempotent: false,
      // The overall timer rules; these only keep undici's own timers from firing first with defaults.
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
    status = res.statusCode;
    responseBody = await readPrefix(res.body, RESPONSE_BODY_LIMIT, chunks);
    return { outcome: classifyResponse(res.statusCode, res.headers), durationMs: elapsed(), responseBody };
  } catch (err) {
    responseBody = bodyText(chunks);
    // A 2xx status means the receiver took it: a body that stalls or breaks afterwards changes nothing.
    if (status !== undefined && status >= 200 && status < 300) {
      return { outcome: { kind: 'delivered', status }, durationMs: elapsed(), responseBody };
    }
    let outcome: AttemptOutcome;
    // The controller's state says which abort happened; undici may surface either reason or its own error.
    if (controller.signal.aborted && !timedOut) outcome = abortedOutcome(caller?.reason);
    else if (timedOut) outcome = { kind: 'retry', errorKind: 'timeout', message: `no complete response within ${opts.timeoutMs} ms` };
    else outcome = classifyError(err);
    if (status !== undefined && outcome.kind !== 'delivered') outcome.status = status;
    return { outcome, durationMs: elapsed(), responseBody };
  } finally {
    clearTimeout(timer);
    caller?.removeEventListener('abort', onCallerAbort);
  }
}

function abortedOutcome(reason: unknown): AttemptOutcome {
  const why = reason instanceof Error && reason.message ? `: ${reason.message.slice(0, 200)}` : '';
  return { kind: 'retry', errorKind: 'aborted', message: `attempt aborted by the worker (shutdown or lease lost)${why}` };
}

/** Reads up to `limit` bytes, then destroys the stream so a huge body is never waited for. */
async function readPrefix(body: Dispatcher.ResponseData['body'], limit: number, chunks: Buffer[]): Promise<string> {
  let size = 0;
  // Leaving the loop early (break) destroys the body, which closes that connection.
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const take = Math.min(chunk.length, limit - size);
    chunks.push(take === chunk.length ? chunk : chunk.subarray(0, take));
    size += take;
    if (size >= limit) break;
  }
  if (!body.destroyed && !body.readableEnded) body.destroy();
  return bodyText(chunks);
}

function bodyText(chunks: Buffer[]): string {
  return Buffer.concat(chunks).toString('utf8').replaceAll('\u0000', '');
}

export interface DeliveryAgentOptions {
  /** Max sockets per origin. Default 64. */
  connections?: number;
}

/** The shared, keep-alive, per-origin pooled agent for deliveries; no interceptors, so no redirects. */
export function createDeliveryAgent(opts: DeliveryAgentOptions = {}): Agent {
  return new Agent({
    connections: opts.connections ?? 64,
    // No pipelining: one slow receiver response must not hold up the next delivery on that socket.
    pipelining: 1,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 60_000,
  });
}
