import { configPath, configWarnings } from '../../config/index.js';
import { readConfig } from '../config.js';
import type { GlobalOptions } from '../exit.js';
import type { CliIo } from '../io.js';

/** `config check`: exit 0 when valid (warnings on stderr), 2 with every problem named by its key. */
export function check(io: CliIo, opts: GlobalOptions): void {
  const cfg = readConfig(io, opts);
  // Valid, so exit 0, but said on stderr.
  for (const w of configWarnings(cfg)) io.stderr.write(`warning: ${w}\n`);
  const path = opts.config ?? configPath({ env: io.env });
  io.stdout.write(`ok: ${path ?? 'built-in defaults'}\n`);
}
