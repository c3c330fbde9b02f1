import { readFileSync } from 'node:fs';
import { EXIT, ExitError } from './exit.js';

/**
 * The secrets in a `--secret-file`, one a line as written (blank lines skipped): a usage error naming the flag
 * when the file cannot be read or holds none. Used by `receive` and the endpoints commands.
 */
export function readSecretFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ExitError(EXIT.usage, `--secret-file: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new ExitError(EXIT.usage, `--secret-file: ${file} is empty`);
  return lines;
}
