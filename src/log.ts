import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

const CENSOR = '[redacted]';

/**
 * Paths pino blanks out wherever they appear in a log object. Secrets never reach a line,
 * but a caller that logs a whole config or request by mistake is caught here too.
 */
const REDACT = [
  'secret',
  'token',
  'password',
  'authorization',
  '*.secret',
  '*.token',
  '*.password',
  '*.authorization',
  'headers["x-acw-signature"]',
  'headers["webhook-signature"]',
  'headers.authorization',
  '*.headers["x-acw-signature"]',
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

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Where lines go; defaults to stdout. Tests pass a stream to read the lines back. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { pid: process.pid },
      redact: { paths: REDACT, censor: CENSOR },
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
