/**
 * Rules that span several keys. They run even when a sibling key failed its own check (so every
 * problem is reported at once), hence the defensive reads: a value may not have its parsed type.
 */
import { formatDuration } from './duration.js';
import { showSecret } from './errors.js';

export type AddIssue = (path: PropertyKey[], message: string) => void;

type Obj = Readonly<Record<string, unknown>>;

export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

// Standard Webhooks keys are `whsec_` + padded base64 (the reference libraries reject bad padding).
const WHSEC = /^whsec_((?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$/;

export function isStandardSecret(secret: string): boolean {
  const b64 = WHSEC.exec(secret)?.[1];
  return b64 !== undefined && Buffer.from(b64, 'base64').length > 0;
}

/** The secret checks shared by the top-level endpoint and each `endpoints[]` entry. */
function checkSecret(ep: Obj, add: AddIssue, missing: string): void {
  const secret = str(ep['secret']);
  if (secret === undefined) return; // a non-string was already reported by its own schema
  if (secret === '') add(['secret'], missing);
  else if (ep['scheme'] === 'standard' && !isStandardSecret(secret)) {
    add(['secret'], `scheme "standard" needs a secret like "whsec_<base64>", got ${showSecret(secret)}`);
  }
}

/** One `notify.webhook.endpoints[]` entry. */
export function checkEndpoint(ep: unknown, add: AddIssue): void {
  if (isObject(ep)) checkSecret(ep, add, 'required (non-empty) for every endpoint');
}

/** `notify.webhook`: the top-level `default` endpoint and the names in `endpoints`. */
export function checkWebhook(w: unknown, add: AddIssue): void {
  if (!isObject(w)) return;
  const hasDefault = (str(w['url']) ?? '') !== '';
  if (hasDefault) checkSecret(w, add, 'required when notify.webhook.url is set');
  const endpoints = Array.isArray(w['endpoints']) ? (w['endpoints'] as unknown[]) : [];
  checkConnectTimeouts(w, endpoints, add);
  const seen = new Map<string, number>();
  endpoints.forEach((ep, i) => {
    const name = isObject(ep) ? str(ep['name']) : undefined;
    if (name === undefined) return;
    const first = seen.get(name);
    if (first !== undefined) add(['endpoints', i, 'name'], `duplicate endpoint name "${name}" (also endpoints[${first}])`);
    else seen.set(name, i);
    if (name === 'default' && hasDefault) {
      add(['endpoints', i, 'name'], '"default" is reserved for the endpoint given by notify.webhook.url');
    }
  });
}

/**
 * A connect timeout given (here or inherited from `notify.webhook.connect_timeout`) cannot exceed
 * the timeout of the endpoint it applies to. An unset one is 5s or the timeout if shorter.
 */
function checkConnectTimeouts(w: Obj, endpoints: unknown[], add: AddIssue): void {
  const timeout = num(w['timeout']);
  const connect = num(w['connect_timeout']);
  if (connect !== undefined && timeout !== undefined && connect > timeout) {
    add(['connect_timeout'], `must not exceed notify.webhook.timeout (${formatDuration(timeout)}), got ${formatDuration(connect)}`);
  }
  endpoints.forEach((ep, i) => {
    if (!isObject(ep)) return;
    const own = num(ep['connect_timeout']);
    const limit = num(ep['timeout']) ?? timeout;
    if (limit === undefined) return;
    if (own !== undefined && own > limit) {
      add(['endpoints', i, 'connect_timeout'], `must not exceed this endpoint's timeout (${formatDuration(limit)}), got ${formatDuration(own)}`);
    } else if (own === undefined && connect !== undefined && connect > limit) {
      add(
        ['endpoints', i, 'connect_timeout'],
        `unset, so notify.webhook.connect_timeout (${formatDuration(connect)}) applies, which exceeds this endpoint's timeout ` +
          `(${formatDuration(limit)}): set one of at most ${formatDuration(limit)}`,
      );
    }
  });
}

/** `jobs.retry`: the first delay cannot exceed the cap. */
export function checkRetry(r: unknown, add: AddIssue): void {
  if (!isObject(r)) return;
  const { base, max } = r;
  if (typeof base === 'number' && typeof max === 'number' && base > max) {
    add(['base'], `must not exceed jobs.retry.max (${formatDuration(max)}), got ${formatDuration(base)}`);
  }
}

/** `server.auth`: user names are unique (they are the upsert key). */
export function checkAuth(a: unknown, add: AddIssue): void {
  const users = isObject(a) && Array.isArray(a['users']) ? (a['users'] as unknown[]) : [];
  const seen = new Map<string, number>();
  users.forEach((u, i) => {
    const name = isObject(u) ? str(u['name']) : undefined;
    if (name === undefined) return;
    const first = seen.get(name);
    if (first !== undefined) add(['users', i, 'name'], `duplicate user name "${name}" (also users[${first}])`);
    else seen.set(name, i);
  });
}
