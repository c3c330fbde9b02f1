import type { IncomingHttpHeaders } from 'node:http';
import type { LookupFunction, Socket } from 'node:net';
import { Agent, buildConnector, errors, type Dispatcher, type Pool } from 'undici';
import type { SsrfGuard } from '../net/ssrf.js';
import { classifyError, classifyResponse, type AttemptOutcome } from './classify.js';

/** How much of a response body is kept (for the attempts table and logs). */
export const RESPONSE_BODY_LIMIT = 4096;

export interface SendOptions {
  /** The HTTP agent: the endpoint's pool (agents.ts) or `createDeliveryAgent()`; it must not carry a redirect interceptor. */
  agent: Dispatcher;
  url: string;
  headers: Record<string, string>;
  body: string;
  /**
   * Budget for the request, response headers and the body read, from when undici starts the request
   * on a connection: waiting for a local socket never counts, and connecting is bounded by the
   * agent's own connect timeout (the endpoint's `connect_timeout`).
   */
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

/** The reason the connection is dropped once the kept prefix is full: the rest is never waited for. */
class PrefixReadError extends Error {
  override name = 'AbortError';
  constructor() {
    super('response body prefix read; the rest is not wanted');
  }
}

/**
 * One POST attempt. Never throws: every failure becomes an outcome.
 *
 * Dispatched straight to the agent with a handler of our own rather than through undici's
 * `request()`: no AbortController per attempt, no response Readable and no async iterator over it.
 * One timer carries the whole-attempt budget, one listener (removed at the end) the caller's signal.
 */
export function sendWebhook(opts: SendOptions): Promise<SendResult> {
  const caller = opts.signal;
  if (caller?.aborted) {
    return Promise.resolve({ outcome: abortedOutcome(caller.reason), durationMs: 0, responseBody: '' });
  }
  return new Promise((resolve) => new Attempt(opts, resolve).start());
}

type Target = { origin: string; path: string } | { error: unknown };

/** Endpoint URLs are few and fixed: parse each once. Bounded, in case URLs ever come from elsewhere. */
const targets = new Map<string, Target>();
const TARGET_CACHE_MAX = 1024;

function target(url: string): Target {
  let t = targets.get(url);
  if (t === undefined) {
    try {
      // As undici's request() does (util.parseURL), which this bypasses.
      const u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') {
        throw new errors.InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.');
      }
      t = { origin: u.origin, path: u.search ? `${u.pathname}${u.search}` : u.pathname };
    } catch (error) {
      t = { error };
    }
    if (targets.size >= TARGET_CACHE_MAX) targets.clear();
    targets.set(url, t);
  }
  return t;
}

/** One attempt's state, and the undici handler for it. Settles exactly once (`finish`). */
class Attempt implements Dispatcher.DispatchHandler {
  private readonly started = performance.now();
  private controller: Dispatcher.DispatchController | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** Set once settled; a later abort of the request (timeout, caller, prefix full) carries it. */
  private abortReason: Error | null = null;
  private status: number | undefined;
  private headers: IncomingHttpHeaders | undefined;
  private first: Buffer | undefined;
  private chunks: Buffer[] | undefined;
  private size = 0;

  constructor(
    private readonly opts: SendOptions,
    private readonly resolve: (r: SendResult) => void,
  ) {}

  start(): void {
    const t = target(this.opts.url);
    if ('error' in t) {
      this.settle(classifyError(t.error), null);
      return;
    }
    this.opts.signal?.addEventListener('abort', this.onCallerAbort);
    try {
      // dispatch() reports a bad request (invalid header) through onResponseError, synchronously.
      this.opts.agent.dispatch(
        {
          origin: t.origin,
          path: t.path,
          method: 'POST',
          headers: this.opts.headers,
          body: this.opts.body,
          // Never a reason to retry silently: a webhook POST is not idempotent for the receiver.
          idempotent: false,
          // The attempt's timer rules; these only keep undici's own timers from firing first with defaults.
          headersTimeout: this.opts.timeoutMs,
          bodyTimeout: this.opts.timeoutMs,
        },
        this,
      );
    } catch (err) {
      this.onResponseError(null, err as Error);
    }
  }

  // --- the whole-attempt timer and the caller's signal (arrow properties: passed as callbacks)

  private readonly onTimeout = (): void => {
    this.timer = undefined;
    if (this.abortReason) return;
    const status = this.status;
    let outcome: AttemptOutcome;
    // A 2xx status means the receiver took it: a body that stalls afterwards changes nothing.
    if (status !== undefined && isSuccess(status)) outcome = { kind: 'delivered', status };
    else {
      outcome = { kind: 'retry', errorKind: 'timeout', message: `no complete response within ${this.opts.timeoutMs} ms` };
      if (status !== undefined) outcome.status = status;
    }
    this.settle(outcome, new AttemptTimeoutError(this.opts.timeoutMs));
  };

  private readonly onCallerAbort = (): void => {
    if (this.abortReason) return;
    const status = this.status;
    const reason: unknown = this.opts.signal?.reason;
    let outcome: AttemptOutcome;
    if (status !== undefined && isSuccess(status)) outcome = { kind: 'delivered', status };
    else {
      outcome = abortedOutcome(reason);
      if (status !== undefined) outcome.status = status;
    }
    this.settle(outcome, reason instanceof Error ? reason : new errors.RequestAbortedError());
  };

  // --- undici's handler

  /**
   * undici calls this once the request has a connected socket and is about to be written (Client
   * writeH1 -> request.onConnect -> UnwrapHandler.onConnect), after any wait in the pool's queue and
   * after the connect; a failed connect never gets here (onResponseError instead). So the attempt's
   * timer starts here. It may be called again if undici retries the request: the timer keeps running.
   */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Settled while the request waited for a connection: drop it now.
    if (this.abortReason) controller.abort(this.abortReason);
    else this.timer ??= setTimeout(this.onTimeout, this.opts.timeoutMs);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (this.abortReason || statusCode < 200) return; // 1xx: informational, the real answer follows
    this.status = statusCode;
    this.headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.abortReason) return;
    const take = Math.min(chunk.length, RESPONSE_BODY_LIMIT - this.size);
    const part = take === chunk.length ? chunk : chunk.subarray(0, take);
    if (this.first === undefined) this.first = part;
    else (this.chunks ??= [this.first]).push(part);
    this.size += take;
    if (this.size >= RESPONSE_BODY_LIMIT) {
      // Enough kept: answer now and close this connection rather than wait for a huge body. The
      // abort runs after the parser's callback returns (as a destroyed body stream's would).
      controller.pause();
      this.settle(this.responseOutcome(), new PrefixReadError());
    }
  }

  onResponseEnd(): void {
    if (this.abortReason) return;
    this.settle(this.responseOutcome(), null);
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, err: Error): void {
    if (this.abortReason) return;
    const status = this.status;
    let outcome: AttemptOutcome;
    if (status !== undefined && isSuccess(status)) outcome = { kind: 'delivered', status };
    else {
      outcome = classifyError(err);
      if (status !== undefined) outcome.status = status;
    }
    this.settle(outcome, null);
  }

  // ---

  private responseOutcome(): AttemptOutcome {
    // onResponseStart has run when the body or its end arrives.
    return classifyResponse(this.status ?? 0, this.headers);
  }

  /**
   * Resolves the attempt once, clears the timer and the caller listener, and (with an `abort`
   * reason) drops the request: now if it is on a socket, else as soon as undici starts it.
   */
  private settle(outcome: AttemptOutcome, abort: Error | null): void {
    this.abortReason = abort ?? SETTLED;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.opts.signal?.removeEventListener('abort', this.onCallerAbort);
    this.resolve({ outcome, durationMs: Math.round(performance.now() - this.started), responseBody: this.bodyText() });
    const controller = this.controller;
    if (abort && controller && !controller.aborted) queueMicrotask(() => controller.abort(abort));
  }

  private bodyText(): string {
    if (this.first === undefined) return '';
    const text = (this.chunks ? Buffer.concat(this.chunks) : this.first).toString('utf8');
    return text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
  }
}

/** Marks an attempt settled without aborting the request (it ended by itself). */
const SETTLED = new Error('settled');

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

function abortedOutcome(reason: unknown): AttemptOutcome {
  const why = reason instanceof Error && reason.message ? `: ${reason.message.slice(0, 200)}` : '';
  return { kind: 'retry', errorKind: 'aborted', message: `attempt aborted by the worker (shutdown or lease lost)${why}` };
}

export interface DeliveryAgentOptions {
  /** Max sockets per origin. Default 64. */
  connections?: number;
  /** TCP (and TLS) connect timeout in ms. Default 5000. */
  connectTimeout?: number;
}

/**
 * The socket settings of every delivery pool: keep-alive, no pipelining, a connect timeout; with a
 * `guard`, every new connection resolves and checks its addresses and connects only to those.
 */
export function deliveryPoolOptions(connections: number, connectTimeout: number, guard?: SsrfGuard): Pool.Options {
  const connect = timedConnector(connectTimeout, guard?.lookup);
  return {
    connections,
    // No pipelining: one slow receiver response must not hold up the next delivery on that socket.
    pipelining: 1,
    // Idle sockets are closed after 4 s (or the receiver's keep-alive hint, up to 60 s).
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 60_000,
    connect: guard ? guard.connector(connect) : connect,
  };
}

/**
 * undici's own connector with our connect timeout. undici's `connectTimeout` runs on its coarse
 * timers (ticks of about 500 ms): a 300 ms one could fire at once or a second late. One native
 * timer per new connection (not per attempt) keeps a short connect_timeout honest.
 */
function timedConnector(timeoutMs: number, lookup?: LookupFunction): buildConnector.connector {
  const connect = buildConnector(lookup ? { timeout: 0, lookup } : { timeout: 0 });
  return (opts, callback) => {
    let timedOut = false;
    let socket: Socket | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      socket?.destroy();
      const where = `${opts.hostname}:${opts.port || (opts.protocol === 'https:' ? 443 : 80)}`;
      callback(new errors.ConnectTimeoutError(`no connection to ${where} within ${timeoutMs} ms (connect_timeout)`), null);
    }, timeoutMs);
    // undici's connector returns its socket (typed void): kept to drop the connect at the timeout.
    socket = connect(opts, (err, sock) => {
      clearTimeout(timer);
      if (timedOut) sock?.destroy(); // a late connect nobody waits for any more
      else if (err) callback(err, null);
      else callback(null, sock as NonNullable<typeof sock>);
    }) as unknown as Socket | undefined;
  };
}

/**
 * A keep-alive, per-origin pooled agent for deliveries; no interceptors, so no redirects. The
 * service uses one pool per endpoint instead (agents.ts); this is for callers that send on their own.
 */
export function createDeliveryAgent(opts: DeliveryAgentOptions = {}): Agent {
  return new Agent(deliveryPoolOptions(opts.connections ?? 64, opts.connectTimeout ?? 5_000));
}
