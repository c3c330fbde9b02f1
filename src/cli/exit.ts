import { ApiError, UsageError } from '../errors.js';

/** Exit codes (README.md#operator-cli): 0 ok, 1 failure, 2 usage or configuration error. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** Thrown by a command to end with a code and a message on stderr. */
export class ExitError extends Error {
  override readonly name = 'ExitError';
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The exit code of whatever a command threw: the one place that decides between 1 and 2. A refusal
 * of bad input (400, 413) is a usage error; one of state (404, 409) a failure.
 */
export function exitCodeOf(err: unknown): number {
  if (err instanceof ExitError) return err.code;
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof ApiError) return err.status === 400 || err.status === 413 ? EXIT.usage : EXIT.failure;
  return EXIT.failure;
}

/** What stderr says for an error a command threw: a refusal in its own words, anything else as unexpected. */
export function errorLine(err: unknown): string {
  const known = err instanceof ExitError || err instanceof UsageError || err instanceof ApiError;
  return known ? `${err.message}\n` : `error: ${(err as Error).message ?? String(err)}\n`;
}

export interface GlobalOptions {
  config?: string;
}
