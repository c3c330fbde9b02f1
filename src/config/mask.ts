/** A copy of the config that is safe to log: secrets, tokens, header values and passwords hidden. */
import { REDACTED, redactUrl } from './redact-url.js';
import type { Config, ConfigData } from './schema.js';

const hide = (v: unknown): unknown => (v === '' ? '' : REDACTED); // an empty secret shows it is unset

function mask(node: unknown, key: string | undefined): unknown {
  if (key === 'secret' || key === 'secret_next' || key === 'token' || key === 'encryption_key') return hide(node);
  if (key === 'old_encryption_keys' && Array.isArray(node)) return node.map(hide);
  if (key === 'sinks' && Array.isArray(node)) return node.map(maskSink);
  if ((key === 'url' || key === 'endpoint' || key === 'traces_endpoint') && typeof node === 'string') return redactUrl(node);
  if (Array.isArray(node)) return node.map((item) => mask(item, undefined));
  if (typeof node !== 'object' || node === null) return node;
  const entries = Object.entries(node);
  // Header values often carry credentials (Authorization, API keys); the names stay visible.
  if (key === 'headers') return Object.fromEntries(entries.map(([k, v]) => [k, hide(v)]));
  return Object.fromEntries(entries.map(([k, v]) => [k, mask(v, k)]));
}

/**
 * An alert sink: its URL's path and query go too, for a Slack-style incoming-webhook URL is a
 * credential in itself (https://hooks.slack.com/services/T…/B…/secret).
 */
function maskSink(node: unknown): unknown {
  const masked = mask(node, undefined);
  if (typeof masked !== 'object' || masked === null || !('url' in masked) || typeof masked.url !== 'string') return masked;
  let shown = masked.url;
  try {
    const u = new URL(masked.url);
    shown = u.pathname === '/' && u.search === '' ? u.origin + '/' : `${u.origin}/${REDACTED}`;
  } catch {
    // not a URL: the schema refused it, and redactUrl already hid what it could
  }
  return { ...masked, url: shown };
}

/** A plain, unfrozen copy of `config` to log at start. */
export function maskConfig(config: Config): ConfigData {
  return mask(config, undefined) as ConfigData; // same shape: only string leaves were replaced
}
