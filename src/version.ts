import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

/** The package version, sent as `User-Agent: acw-webhooks/<version>`. */
export const VERSION: string = pkg.version;
