import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

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
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A logger that drops everything, for library callers that pass none. */
export const silentLogger: Logger = pino({ level: 'silent' });
