/**
 * Errors typed by what the caller must do.
 * - PermanentError: retrying cannot help; the job goes dead at once.
 * - Anything else thrown by a handler is retried with back-off until max_attempts.
 */
export class PermanentError extends Error {
  override readonly name = 'PermanentError';
}

/** Bad input from a user (config, CLI argument, request): nothing was changed. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Turn whatever was thrown into an Error, keeping the original as `cause`. */
export function coerceError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === 'string' ? thrown : `non-error thrown: ${String(thrown)}`, { cause: thrown });
}
