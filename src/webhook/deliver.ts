import type { Dispatcher } from 'undici';
import type { Endpoint } from '../config/index.js';
import { hotLogger, type Logger } from '../log.js';
import type { Finished } from '../queue/flusher.js';
import type { AttemptRecord, ClaimedJob, JobOutcome } from '../queue/types.js';
import type { OutcomeHandler } from '../queue/worker.js';
import { sendWebhook } from './send.js';
import { eventBody, isDeliverPayload, WEBHOOK_JOB, type DeliverPayload } from './job.js';
import { buildHeaders, signingSecrets } from './sign.js';
import { carrierOf, type TraceCarrier } from '../tracing/carrier.js';
import { tracing } from '../tracing/runtime.js';

/** A job whose endpoint stays unknown this long goes dead (a rolling deploy is over by then). */
export const UNKNOWN_ENDPOINT_DEAD_AFTER_MS = 24 * 3600_000;

export interface DeliverOptions {
  /** The endpoints in force now: read at every attempt, so a fixed URL or rotated secret applies to retries. */
  endpoints: () => ReadonlyMap<string, Endpoint>;
  /** The HTTP agent for an endpoint's attempts: its own pool (EndpointAgents.agentFor), or one for all (tests: a MockAgent). */
  agentFor: (ep: Endpoint) => Dispatcher;
  /** How long a job with an unknown or disabled endpoint first waits before it looks again. */
  recheckMs: number;
  /** Is this job a circuit breaker's probe? A failed probe is handed back without spending its attempt. */
  isProbe?: (jobId: string) => boolean;
  /** The longest wait between looks (never below recheckMs): each wait is as long as the job has been skipped, up to this. */
  recheckMaxMs: number;
  log: Logger;
}

/**
 * The `webhook.deliver` handler: sign the job's body (its own, or made from its event), POST it once,
 * and say what that came to.
 * The attempt row rides along with the outcome and is written in the same statement.
 */
export function createDeliverHandler(opts: DeliverOptions): OutcomeHandler {
  return async (job: ClaimedJob, { signal }): Promise<JobOutcome> => {
    const name = job.endpoint ?? '';
    const ep = opts.endpoints().get(name);
    if (!ep || !ep.enabled) {
      const why = ep ? `endpoint ${name} is disabled` : `endpoint ${name} is not configured`;
      // The first skip of a job is logged at info, the later looks at debug: a paused
      // endpoint's backlog would otherwise log a line per job every few seconds.
      const fields = { event: 'webhook.skipped', job_id: job.id, endpoint: name, reason: ep ? 'endpoint_disabled' : 'endpoint_unknown' };
      if (job.skippedTurnsSince) opts.log.debug(fields, why);
      else opts.log.info(fields, why);
      // Each wait is as long as the job has been skipped so far (from recheckMs up to recheckMaxMs),
      // so the looks thin out: a big backlog is not claimed and released over and over. A process
      // that starts with the endpoint enabled and known makes its skipped jobs due at once.
      const skippedFor = job.skippedTurnsSince ? Math.max(0, Date.now() - job.skippedTurnsSince.getTime()) : 0;
      return {
        kind: 'release',
        delayMs: Math.min(Math.max(opts.recheckMs, skippedFor), Math.max(opts.recheckMs, opts.recheckMaxMs)),
        error: why,
        // Only time unknown counts towards going dead; a paused one waits for the operator.
        park: ep ? { reason: 'disabled', deadAfterMs: Infinity } : { reason: 'unknown', deadAfterMs: UNKNOWN_ENDPOINT_DEAD_AFTER_MS },
      };
    }
    if (!isDeliverPayload(job.payload)) return { kind: 'permanent', error: 'payload has no body/topic: not a webhook.deliver job' };
    const { topic, schema_version: schemaVersion } = job.payload;
    const body = bodyOf(job, job.payload);
    if (body === undefined) return { kind: 'permanent', error: `its event ${job.eventId ?? '(none)'} is gone: no body to send` };
    const now = Date.now();
    const timestamp = Math.floor(now / 1000);
    // The secrets current at this attempt: a retry of an old job during or after a rotation uses today's.
    const keys = signingSecrets(ep, now);
    // buildHeaders only reads `extra`: no copy of the endpoint's headers per attempt.
    const headers = buildHeaders({
      scheme: ep.scheme,
      secret: keys.secret,
      secretNext: keys.next,
      jobId: job.id,
      topic,
      schemaVersion,
      body,
      timestamp,
      extra: ep.headers,
      orderingKey: job.orderingKey,
      orderingSeq: job.orderingSeq,
    });
    // Its own trace, linked to the notify's (docs/operations.md#tracing); with propagate_trace the
    // receiver's trace continues from it.
    const span = tracing?.attempt(job, {
      carrier: traceOf(job.payload),
      endpoint: name,
      url: ep.url,
      attempt: job.attempts,
      eventId: job.eventId,
    });
    if (span && ep.propagate_trace) Object.assign(headers, span.headers);
    const sent = await sendWebhook({ agent: opts.agentFor(ep), url: ep.url, headers, body, timeoutMs: ep.timeout, signal });
    const echoed = [...secretHeaderValues(headers, ep), keys.secret, keys.next ?? '', urlPassword(ep.url)];
    const o = sent.outcome.kind === 'delivered' ? sent.outcome : { ...sent.outcome, message: redactEcho(sent.outcome.message, echoed) };
    const attempt: AttemptRecord = {
      attempt: job.attempts,
      endpoint: name,
      statusCode: o.status ?? null,
      errorKind: o.kind === 'delivered' ? null : o.errorKind,
      error: o.kind === 'delivered' ? null : o.message,
      durationMs: sent.durationMs,
      responseBody: redactEcho(sent.responseBody, echoed),
      aborted: o.kind === 'retry' && o.errorKind === 'aborted',
    };
    span?.sent(attempt.statusCode, attempt.errorKind);
    if (opts.isProbe?.(job.id)) {
      attempt.probe = true;
      // The endpoint is still down: the job waits for the next probe with its attempt unspent.
      if (o.kind === 'retry' && !attempt.aborted) return { kind: 'release', delayMs: 0, error: `probe failed: ${o.message}`, attempt };
    }
    if (o.kind === 'delivered') return { kind: 'complete', attempt };
    if (o.kind === 'permanent') return { kind: 'permanent', error: o.message, attempt };
    return { kind: 'retry', error: o.message, attempt, ...(o.retryAfterMs !== undefined ? { retryAfterMs: o.retryAfterMs } : {}) };
  };
}

/**
 * The body this attempt sends: the one the payload carries, or the one made from the job's event
 * (read with its claim); undefined when it has neither (an event removed by hand).
 */
function bodyOf(job: ClaimedJob, p: DeliverPayload): string | undefined {
  if (p.body !== undefined) return p.body;
  return job.event && job.eventId ? eventBody(job.eventId, p.topic, job.event) : undefined;
}

/** The producer's trace context the job carries, if any. */
function traceOf(p: DeliverPayload): TraceCarrier | undefined {
  return p.traceparent === undefined ? undefined : carrierOf(p.traceparent, p.tracestate);
}

const ECHO_CENSOR = '[redacted]';
/** Shorter values are left alone: replacing "1" or "ops" everywhere would garble the answer and protect nothing. */
const MIN_SECRET_LENGTH = 8;

/** The signature headers sent and the endpoint's own headers (credentials such as Authorization): their values are secret. */
function secretHeaderValues(sent: Readonly<Record<string, string>>, ep: Endpoint): string[] {
  const own = new Set(Object.keys(ep.headers).map((k) => k.toLowerCase()));
  return Object.entries(sent)
    .filter(([k]) => /signature/i.test(k) || own.has(k.toLowerCase()))
    .map(([, v]) => v);
}

function urlPassword(url: string): string {
  try {
    return decodeURIComponent(new URL(url).password);
  } catch {
    return '';
  }
}

/**
 * A receiver's answer with what this attempt sent that is secret replaced: a careless receiver
 * (a debug error page) echoes the request's headers, and the answer is stored with the attempt,
 * shown by `GET /v1/jobs/:id` and `jobs show`, and quoted in errors.
 */
function redactEcho(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= MIN_SECRET_LENGTH && out.includes(s)) out = out.split(s).join(ECHO_CENSOR);
  return out;
}

/**
 * One `webhook.attempt` line per attempt, once its outcome is written (so it can say what comes next).
 * Flat, known-safe fields only, so it goes through the logger's hot sibling (no wildcard redaction).
 */
export function logAttempt(log: Logger, f: Finished, changed: boolean, nextRunAt: Date | undefined): void {
  const a = f.outcome.attempt;
  if (!a || f.job.type !== WEBHOOK_JOB) return;
  const final = f.outcome.kind === 'complete' ? 'completed' : f.outcome.kind === 'release' ? 'released' : nextRunAt ? 'retry' : 'dead';
  const t = tracing;
  if (t === null) writeAttemptLine(log, f, a, changed ? final : 'lease_lost', changed ? nextRunAt : undefined);
  else
    t.attemptWritten(f.job, !changed ? 'lease_lost' : final === 'released' ? 'held' : final, () =>
      writeAttemptLine(log, f, a, changed ? final : 'lease_lost', changed ? nextRunAt : undefined),
    );
}

function writeAttemptLine(log: Logger, f: Finished, a: AttemptRecord, result: string, nextRunAt: Date | undefined): void {
  hotLogger(log).info(
    {
      event: 'webhook.attempt',
      job_id: f.job.id,
      event_id: f.job.eventId,
      endpoint: a.endpoint,
      attempt: a.attempt,
      status: a.statusCode,
      error_kind: a.errorKind,
      duration_ms: a.durationMs,
      result,
      next_retry_at: nextRunAt ? nextRunAt.toISOString() : null,
    },
    a.errorKind ? `attempt ${a.attempt} failed: ${a.errorKind}${a.statusCode ? ` ${a.statusCode}` : ''}` : `delivered: ${a.statusCode}`,
  );
}
