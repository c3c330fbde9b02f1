/**
 * Errors typed by what the caller must do.
 * - PermanentError: retrying cannot help; the job goes dead at once.
 * - Anything else thrown by a handler is retried with back-off until max_attempts.
 * - ApiError: a refusal of a request (HTTP, CLI, library call) the caller can act on.
 * - UsageError: bad input to the CLI or config; nothing was changed.
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

/**
 * A refusal the caller can act on, with the HTTP status it maps to, a stable `code`, a message that
 * names the offending field first (`events[2].topic: ...`), and details (`field` among them, so
 * clients need not parse the message). The HTTP layer answers it as it is (docs/operations.md
 * lists the codes); the CLI turns it into an exit code (src/cli/context.ts exitCodeOf).
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Response headers that go with it (`www-authenticate`, `retry-after`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A 400 naming the offending field (in `details.field` too). */
export function badField(field: string, message: string, extra: Record<string, unknown> = {}): ApiError {
  return new ApiError(400, 'invalid_input', `${field}: ${message}`, { field, ...extra });
}
