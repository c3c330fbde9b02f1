/** A refusal of an operator operation; HTTP maps `status` straight through, the CLI prints `message`. */
export class AdminError extends Error {
  override readonly name = 'AdminError';
  constructor(
    readonly status: 400 | 404 | 409,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** A 400 naming the offending field (in `details.field` too, so clients need not parse the message). */
export function badField(field: string, message: string, extra: Record<string, unknown> = {}): AdminError {
  return new AdminError(400, 'invalid_input', `${field}: ${message}`, { field, ...extra });
}
