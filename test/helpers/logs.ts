import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log.js';

export interface LogLine {
  level: number;
  event?: string;
  job_id?: string;
  [k: string]: unknown;
}

/** A real pino logger whose JSON lines are kept for assertions. */
export function captureLogs(level: 'debug' | 'info' | 'trace' = 'debug'): {
  log: Logger;
  lines: LogLine[];
  events: (name: string) => LogLine[];
  raw: () => string;
} {
  const lines: LogLine[] = [];
  let raw = '';
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const text = chunk.toString('utf8');
      raw += text;
      for (const l of text.split('\n')) if (l.trim()) lines.push(JSON.parse(l) as LogLine);
      cb();
    },
  });
  const log = createLogger({ level, destination });
  return { log, lines, events: (name) => lines.filter((l) => l.event === name), raw: () => raw };
}

/** Poll until `fn` returns a truthy value (or throw after timeoutMs). For waiting on real systems, not for timing. */
export async function waitFor<T>(fn: () => Promise<T> | T, timeoutMs = 10_000, everyMs = 20): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`waitFor timed out after ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
