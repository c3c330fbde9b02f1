import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

const CENSOR = '[redacted]';

/**
 * Paths pino blanks out wherever they appear in a log object. Secrets never reach a line,
 * but a caller that logs a whole config or request by mistake is caught here too.
 */
const REDACT = [
  'secret',
  'secret_next',
  'token',
  'password',
  'authorization',
  '*.secret',
  '*.secret_next',
  '*.token',
  '*.password',
  '*.authorization',
  'headers["x-acw-signature"]',
  'headers["x-acw-signature-next"]',
  'headers["webhook-signature"]',
  'headers.authorization',
  '*.headers["x-acw-signature"]',
  '*.headers["x-acw-signature-next"]',
  '*.headers["webhook-signature"]',
  '*.headers.authorization',
];

/**
 * The paths without a wildcard. A wildcard path makes pino run the redactor over the value of
 * every key of every line (pino 10: `@pinojs/redact` re-parses each path per key), which was 5% of
 * a worker's busy time; an exact path costs nothing on a line that lacks its key. Hot lines carry
 * only primitive values (see `SafeFields`), so nothing nested can hide under them for a wildcard to find.
 */
const HOT_REDACT = REDACT.filter((p) => !p.startsWith('*'));

/** Keys whose value is censored at any depth (compared lower-cased), for `scrubDeep`. */
const SENSITIVE_KEYS = new Set([
  'secret',
  'secret_next',
  'token',
  'password',
  'authorization',
  'x-acw-signature',
  'x-acw-signature-next',
  'webhook-signature',
]);

/** Keys whose string value is error text, which may quote a URL, a header or a query string. */
const TEXT_KEYS = new Set(['err', 'error', 'message', 'stack', 'last_error']);

/** Secrets as they appear inside text: a URL's password, a bearer token, a signature, a secret-looking query parameter. */
const SECRET_IN_TEXT: ReadonlyArray<readonly [RegExp, string]> = [
  [/(\/\/[^\s/:@]*:)[^\s/@]+@/g, `$1${CENSOR}@`],
  [/\b(bearer\s+)[^\s"',;]+/gi, `$1${CENSOR}`],
  [/\b(sha256=)[0-9a-f]{8,}/gi, `$1${CENSOR}`],
  [/\b(v1,)[A-Za-z0-9+/=]{8,}/g, `$1${CENSOR}`],
  [/\b((?:secret|token|password|api_key|access_token)[=:]\s*)[^\s&#"',;]+/gi, `$1${CENSOR}`],
];

/** Error text with the secrets it quotes censored. */
export function scrubText(text: string): string {
  let out = text;
  for (const [re, to] of SECRET_IN_TEXT) out = out.replace(re, to);
  return out;
}

/**
 * The net under the redact paths, which reach only one object down: sensitive keys censored at
 * any depth, and error text scrubbed. Returns `value` itself when nothing changes, so a flat line
 * of primitives (every hot line) costs one pass over its keys and no copy.
 */
function scrubDeep(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (!value || typeof value !== 'object' || depth > 10 || seen.has(value)) return value;
  seen.add(value);
  if (value instanceof Error) return scrubError(value, depth, seen);
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((v: unknown, i) => {
      const s = scrubDeep(v, depth + 1, seen);
      if (s !== v) (copy ??= [...value])[i] = s;
    });
    return copy ?? value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    let s: unknown = v;
    if (v !== undefined && SENSITIVE_KEYS.has(k.toLowerCase())) s = CENSOR;
    else if (typeof v === 'string') s = TEXT_KEYS.has(k) ? scrubText(v) : v;
    else if (v && typeof v === 'object') s = scrubDeep(v, depth + 1, seen);
    if (s !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = s;
  }
  return copy ?? value;
}

/** `scrubDeep` for a whole line, with a fast path: a flat line with nothing to censor is returned as is, with no allocation. */
function scrubLine(obj: Record<string, unknown>): Record<string, unknown> {
  for (const k in obj) {
    const v = obj[k];
    if ((v && typeof v === 'object') || (typeof v === 'string' && TEXT_KEYS.has(k)) || SENSITIVE_KEYS.has(k.toLowerCase())) {
      return scrubDeep(obj, 0, new WeakSet()) as Record<string, unknown>;
    }
  }
  return obj;
}

/** A copy of the error (same prototype, so pino's serializer still names its type) with its text scrubbed; or itself when clean. */
function scrubError(err: Error, depth: number, seen: WeakSet<object>): Error {
  const fields: Record<string, unknown> = { ...err, message: err.message, stack: err.stack };
  if ('cause' in err) fields.cause = err.cause;
  const clean = scrubDeep(fields, depth, seen);
  if (clean === fields) return err;
  return Object.assign(Object.create(Object.getPrototypeOf(err) as object) as Error, clean);
}

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Where lines go; defaults to stdout. Tests pass a stream to read the lines back. */
  destination?: NodeJS.WritableStream;
}

/** Fields every line gets from where it is written: the active span's ids while tracing is on (src/tracing/sdk.ts). */
let lineFields: (() => Record<string, string> | undefined) | null = null;

/** Set (or clear, with null) what each line written inside an active span carries (docs/operations.md#logs). */
export function setLineFields(fn: (() => Record<string, string> | undefined) | null): void {
  lineFields = fn;
}

const NO_FIELDS: Record<string, string> = {};

/** pino's mixin: the trace ids of the active span, nothing (and no copy of the line) when tracing is off or no span is active. */
function traceMixin(): Record<string, string> {
  return lineFields?.() ?? NO_FIELDS;
}

function mergeMixin(line: object, fields: object): object {
  return fields === NO_FIELDS ? line : Object.assign(fields, line);
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      mixin: traceMixin,
      mixinMergeStrategy: mergeMixin,
      base: { pid: process.pid },
      redact: { paths: REDACT, censor: CENSOR },
      formatters: { log: scrubLine },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A logger that drops everything, for library callers that pass none. */
export const silentLogger: Logger = pino({ level: 'silent' });

/** A value a hot line may carry: never an object, so a config, request or headers object cannot ride along. */
export type SafeValue = string | number | boolean | null | undefined;

/** Keys a hot line may not use at all (they would be censored anyway). */
type SensitiveKey = 'secret' | 'token' | 'password' | 'authorization' | 'headers';

/** The fields of a hot line: flat, primitive, none of the sensitive names. */
export type SafeFields = { readonly [key: string]: SafeValue } & { readonly [K in SensitiveKey]?: never };

export type HotLogFn = (fields: SafeFields, msg: string) => void;

/** The levels of a `Logger`, narrowed to flat, known-safe fields. */
export interface HotLogger {
  readonly fatal: HotLogFn;
  readonly error: HotLogFn;
  readonly warn: HotLogFn;
  readonly info: HotLogFn;
  readonly debug: HotLogFn;
  readonly trace: HotLogFn;
  isLevelEnabled(level: string): boolean;
}

const hotLoggers = new WeakMap<Logger, HotLogger>();

/**
 * The cheap sibling of `log` for per-job lines (`webhook.attempt`, `job.*`): a pino child with
 * the same destination, bindings and line format, whose level follows `log`'s, but which keeps
 * only the exact (non-wildcard) redact paths. Its type admits only flat primitive fields, so what
 * the wildcards exist for (a whole object logged by mistake) cannot reach it; anything else goes
 * through `log` itself, which redacts as before. Made once per logger; hold on to it or call this
 * per line (a WeakMap lookup).
 */
export function hotLogger(log: Logger): HotLogger {
  let hot = hotLoggers.get(log);
  if (!hot) {
    // No `level` option: the child keeps inheriting the level (and its methods) from `log`.
    hot = log.child({}, { redact: { paths: HOT_REDACT, censor: CENSOR } });
    hotLoggers.set(log, hot);
  }
  return hot;
}
