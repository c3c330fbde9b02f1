/** A copy of the config that is safe to log: secrets, tokens, header values and passwords hidden. */
import type { Config, ConfigData } from './schema.js';

export const REDACTED = '[redacted]';

/** Query parameters whose values are credentials by their name (`token`, `api_key`, `sig`, `X-Amz-Signature`…). */
const CREDENTIAL_PARAM = /([?&;\s][\w.-]*(?:pass(?:word)?|secret|token|key|sig(?:nature)?|auth|credential)[\w.-]*=)[^&#;\s]*/gi;

/** Hides the password of `scheme://user:password@host` and the value of any credential-named query parameter. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@]*?:)[^/?#]*@/i, `$1${REDACTED}@`).replaceAll(CREDENTIAL_PARAM, `$1${REDACTED}`);
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
