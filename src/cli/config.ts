import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { EXIT, ExitError, type GlobalOptions } from './exit.js';
import type { CliIo } from './io.js';

/** `needSecrets: false` for commands that never deliver: they run without the endpoints' secrets (see LoadOptions). */
export function readConfig(io: CliIo, opts: GlobalOptions, load: { needSecrets?: boolean } = {}): Config {
  try {
    return loadConfig({ ...(opts.config ? { path: opts.config } : {}), env: io.env, ...load });
  } catch (err) {
    if (err instanceof ConfigError) throw new ExitError(EXIT.usage, `configuration error:\n${err.issues.map((i) => `  ${i}`).join('\n')}`);
    throw err;
  }
}
