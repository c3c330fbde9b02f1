/**
 * Standard output that may be closed under us: `acw-webhooks jobs list | head -1` closes the pipe
 * after one line, and the next write fails with EPIPE. Node reports that as an 'error' event on
 * process.stdout, which unhandled ended the command with a stack trace and exit 1 and skipped the
 * clean-up that stops an embedded PostgreSQL. A closed stdout only means nobody wants the rest:
 * stop printing, finish quietly (exit 0) and let the command close what it opened.
 */
const closed = new AbortController();

/** Aborted once stdout is closed by its reader. */
export const stdoutClosed: AbortSignal = closed.signal;

let installed = false;

/** Handle errors on stdout and stderr (once per process; main() calls it). */
export function guardOutput(): void {
  if (installed) return;
  installed = true;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (!closed.signal.aborted) closed.abort();
    if (err.code !== 'EPIPE') {
      process.stderr.write(`error: cannot write to stdout: ${err.code ?? err.message}\n`);
      process.exitCode = 1;
    }
  });
  // A closed stderr leaves nowhere to report anything; carry on without it.
  process.stderr.on('error', () => undefined);
}

/** Write one line to stdout; false once stdout is closed (callers printing a list stop there). */
export function writeLine(text: string): boolean {
  if (closed.signal.aborted) return false;
  process.stdout.write(`${text}\n`);
  return true;
}
