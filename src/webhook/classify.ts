import { parseRetryAfter } from './retry-after.js';

/**
 * errorKind values (short snake_case, stored in webhook_attempts and logs):
 *   http_status     the endpoint answered with a non-2xx, non-3xx status (see `status`)
 *   redirect        a 3xx answer; redirects are never followed (permanent)
 *   invalid_request the request could not be built (bad URL, invalid extra header) (permanent)
 *   timeout         the attempt timeout, the connect_timeout, or an undici headers/body timeout
 *   dns             the host name did not resolve (ENOTFOUND, EAI_AGAIN)
 *   connect         refused/reset/broken connection, socket closed early
 *   tls             TLS handshake or certificate failure
 *   protocol        the endpoint's answer was not valid HTTP
 *   network         any other transport error
 *   aborted         our side gave up: worker shutdown or lease lost (not the endpoint's fault)
 *   blocked_address the SSRF guard refused the address the host is or resolves to (permanent; docs/operations.md#ssrf-guard)
 */
export type ErrorKind =
  | 'http_status'
  | 'redirect'
  | 'invalid_request'
  | 'timeout'
  | 'dns'
  | 'connect'
  | 'tls'
  | 'protocol'
  | 'network'
  | 'aborted'
  | 'blocked_address';

export type AttemptOutcome =
  | { kind: 'delivered'; status: number }
  | { kind: 'permanent'; status?: number; errorKind: string; message: string }
  | { kind: 'retry'; status?: number; errorKind: string; message: string; retryAfterMs?: number };

export type ResponseHeaders = Record<string, string | string[] | undefined>;

const RETRYABLE_4XX = new Set([408, 425, 429]);
const HONOURS_RETRY_AFTER = new Set([429, 503]);
const MAX_MESSAGE = 500;

/** 2xx delivered; 3xx and 4xx permanent (but 408/425/429 retry); 5xx retry (README.md#receiving-webhooks). */
export function classifyResponse(status: number, headers: ResponseHeaders = {}, now: number = Date.now()): AttemptOutcome {
  if (status >= 200 && status < 300) return { kind: 'delivered', status };
  if (status >= 300 && status < 400) {
    const location = header(headers, 'location');
    const where = location === undefined ? '' : ` (Location: ${truncate(location, 200)})`;
    return { kind: 'permanent', status, errorKind: 'redirect', message: `HTTP ${status}: redirects are not followed${where}` };
  }
  if (status >= 400 && status < 500 && !RETRYABLE_4XX.has(status)) {
    return { kind: 'permanent', status, errorKind: 'http_status', message: `HTTP ${status}` };
  }
  // 408/425/429, 5xx, and anything outside the known classes: the endpoint may recover.
  const outcome: AttemptOutcome = { kind: 'retry', status, errorKind: 'http_status', message: `HTTP ${status}` };
  if (HONOURS_RETRY_AFTER.has(status)) {
    const retryAfterMs = parseRetryAfter(headers['retry-after'] ?? header(headers, 'retry-after'), now);
    if (retryAfterMs !== null) outcome.retryAfterMs = retryAfterMs;
  }
  return outcome;
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
]);
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
const INVALID_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'ERR_INVALID_URL', 'ERR_INVALID_ARG_TYPE']);
/** BlockedAddressError's code (src/net/ssrf.ts): the endpoint's address stays refused until config opens it. */
const BLOCKED_ADDRESS = 'ACW_BLOCKED_ADDRESS';

/**
 * A transport failure as an outcome. Which abort it was (our timeout or the caller's signal) is
 * known only to the sender, so `sendWebhook` decides that first; here a TimeoutError-named
 * reason means timeout and any other abort means `aborted`.
 */
export function classifyError(err: unknown): AttemptOutcome {
  const code = errorCode(err);
  const name = err instanceof Error ? err.name : '';
  const message = describe(err);
  if (name === 'TimeoutError' || (code !== undefined && TIMEOUT_CODES.has(code))) {
    return { kind: 'retry', errorKind: 'timeout', message };
  }
  if (name === 'AbortError' || code === 'UND_ERR_ABORTED' || code === 'ABORT_ERR') {
    return { kind: 'retry', errorKind: 'aborted', message };
  }
  if (code === BLOCKED_ADDRESS) return { kind: 'permanent', errorKind: 'blocked_address', message };
  if (code !== undefined && DNS_CODES.has(code)) return { kind: 'retry', errorKind: 'dns', message };
  if (code !== undefined && CONNECT_CODES.has(code)) return { kind: 'retry', errorKind: 'connect', message };
  if (code !== undefined && INVALID_CODES.has(code)) return { kind: 'permanent', errorKind: 'invalid_request', message };
  if (code !== undefined && (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || /CERT|SELF_SIGNED|UNABLE_TO/.test(code))) {
    return { kind: 'retry', errorKind: 'tls', message };
  }
  if (code === 'HPE_INVALID_CONSTANT' || name === 'HTTPParserError' || code?.startsWith('HPE_') === true) {
    return { kind: 'retry', errorKind: 'protocol', message };
  }
  return { kind: 'retry', errorKind: 'network', message };
}

/** The most specific error code: the error's own, its cause's, or the first of an AggregateError (happy eyeballs). */
function errorCode(err: unknown, depth = 0): string | undefined {
  if (typeof err !== 'object' || err === null || depth > 3) return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && e.code !== 'UND_ERR') return e.code;
  if (Array.isArray(e.errors) && e.errors.length > 0) return errorCode(e.errors[0], depth + 1);
  return errorCode(e.cause, depth + 1);
}

/** `CODE: message`, bounded; never includes request headers (they carry the signature). */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return truncate(`non-error thrown: ${String(err)}`, MAX_MESSAGE);
  const code = errorCode(err);
  // AggregateError (happy eyeballs) has an empty message; its first inner error says what happened.
  const inner = err instanceof AggregateError && err.errors[0] instanceof Error ? err.errors[0].message : '';
  const text = err.message || inner || err.name;
  return truncate(code !== undefined && !text.includes(code) ? `${code}: ${text}` : text, MAX_MESSAGE);
}

function header(headers: ResponseHeaders, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
