/** A copy of the config that is safe to log: secrets, tokens, header values and passwords hidden. */
import type { Config, ConfigData } from './schema.js';

export const REDACTED = '[redacted]';

/** A query (or fragment) parameter: `[?&;#]name=value`; a libpq keyword string uses spaces. */
const PARAM = /([?&;#\s])([^=&#;?/\s]+)=([^&#;\s]*)/g;
/** Names that carry credentials: a whole word of the name (`api_key`, `X-Amz-Signature`) or a camelCase tail (`apiKey`). */
const CREDENTIAL_WORD = /(?:^|[_.-])(?:pass(?:word|wd)?|secret|token|key|apikey|sig|signature|auth|authorization|credentials?)(?:$|[_.-])/i;
const CREDENTIAL_TAIL = /[a-z0-9](?:Key|Token|Secret|Signature|Password|Auth)$/;

/**
 * Hides the password of `scheme://user:password@host`, the user of an http(s) URL with no
 * password (`https://TOKEN@host`, a common way to pass a key), and the values of credential-named
 * query and fragment parameters (`token`, `api_key`, `sig`, `X-Amz-Signature`, `apiKey`…).
 */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@]*?:)[^/?#]*@/i, `$1${REDACTED}@`)
    .replace(/^(https?:\/\/)[^/?#@:]+@/i, `$1${REDACTED}@`)
    .replaceAll(PARAM, (all, lead: string, name: string) =>
      CREDENTIAL_WORD.test(name) || CREDENTIAL_TAIL.test(name) ? `${lead}${name}=${REDACTED}` : all,
    );
}

const hide = (v: unknown): unknown => (v === '' ? '' : REDACTED); // an empty secret shows it is unset

function mask(node: unknown, key: string | undefined): unknown {
  if (key === 'secret' || key === 'token') return hide(node);
  if (key === 'url' && typeof node === 'string') return redactUrl(node);
  if (Array.isArray(node)) return node.map((item) => mask(item, undefined));
  if (typeof node !== 'object' || node === null) return node;
  const entries = Object.entries(node);
  // Header values often carry credentials (Authorization, API keys); the names stay visible.
  if (key === 'headers') return Object.fromEntries(entries.map(([k, v]) => [k, hide(v)]));
  return Object.fromEntries(entries.map(([k, v]) => [k, mask(v, k)]));
}

/** A plain, unfrozen copy of `config` to log at start. */
export function maskConfig(config: Config): ConfigData {
  return mask(config, undefined) as ConfigData; // same shape: only string leaves were replaced
}
