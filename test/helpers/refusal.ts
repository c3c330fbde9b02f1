import { ApiError } from '../../src/errors.js';

/** The ApiError `fn` throws; any other error is thrown again, and no error at all fails the test. */
export function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('not refused');
}
