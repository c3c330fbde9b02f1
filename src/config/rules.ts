/**
 * Rules that span several keys. They run even when a sibling key failed its own check (so every
 * problem is reported at once), hence the defensive reads: a value may not have its parsed type.
 */
import { formatDuration } from './duration.js';
import { isValidTopic } from './topics.js';
import { showSecret, type Issue } from './errors.js';

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

/** The form of a secret that is set, for the top-level endpoint and each `endpoints[]` entry (missing ones: missingSecrets). */
function checkSecret(ep: Obj, add: AddIssue): void {
  for (const key of ['secret', 'secret_next']) {
    const secret = str(ep[key]);
    if (secret === undefined || secret === '') continue; // a non-string was already reported by its own schema
    if (ep['scheme'] === 'standard' && !isStandardSecret(secret)) {
      add([key], `scheme "standard" needs a secret like "whsec_<base64>", got ${showSecret(secret)}`);
    }
  }
  checkRotation(ep, add);
}

/** A rotation (docs/operations.md#rotating-a-secret) is the new secret and the end of the overlap, both or neither. */
function checkRotation(ep: Obj, add: AddIssue): void {
  const hasNext = ep['secret_next'] !== undefined;
  const hasUntil = ep['rotate_until'] !== undefined;
  if (hasNext && !hasUntil) add(['rotate_until'], 'required with secret_next: the end of the overlap, like "2026-12-01T06:00:00Z"');
  if (hasUntil && !hasNext) add(['secret_next'], 'required with rotate_until: the new secret');
  const secret = str(ep['secret']);
  if (hasNext && secret !== undefined && secret !== '' && ep['secret_next'] === secret) {
    add(['secret_next'], 'is the same as secret: a rotation needs a new secret');
  }
}

/** One `notify.webhook.endpoints[]` entry. */
export function checkEndpoint(ep: unknown, add: AddIssue): void {
  if (isObject(ep)) checkSecret(ep, add);
}

const noSecret = (ep: Obj): boolean => ep['secret'] === undefined || ep['secret'] === '';
const emptyNext = (ep: Obj): boolean => ep['secret_next'] === '';

/**
 * Endpoints with no secret, on the interpolated tree. Apart from the schema because only the
 * commands that deliver need them (LoadOptions.needSecrets); the others take the config without.
 */
export function missingSecrets(tree: unknown): Issue[] {
  const notify = isObject(tree) ? tree['notify'] : undefined;
  const w = isObject(notify) ? notify['webhook'] : undefined;
  if (!isObject(w)) return missingSinkSecrets(tree);
  const out: Issue[] = [];
  const url = str(w['url']);
  if (url !== undefined && url !== '' && noSecret(w))
    out.push({ path: ['notify', 'webhook', 'secret'], message: 'required when notify.webhook.url is set' });
  if (url !== undefined && url !== '' && emptyNext(w))
    out.push({ path: ['notify', 'webhook', 'secret_next'], message: 'must not be empty' });
  const endpoints = Array.isArray(w['endpoints']) ? (w['endpoints'] as unknown[]) : [];
  endpoints.forEach((ep, i) => {
    if (isObject(ep) && noSecret(ep))
      out.push({ path: ['notify', 'webhook', 'endpoints', i, 'secret'], message: 'required (non-empty) for every endpoint' });
    if (isObject(ep) && emptyNext(ep))
      out.push({ path: ['notify', 'webhook', 'endpoints', i, 'secret_next'], message: 'must not be empty' });
  });
  out.push(...missingSinkSecrets(tree));
  return out;
}

/** Sinks of format `webhook` (the default) with no secret: their alerts could not be signed. */
function missingSinkSecrets(tree: unknown): Issue[] {
  const alerts = isObject(tree) ? tree['alerts'] : undefined;
  const sinks = isObject(alerts) && Array.isArray(alerts['sinks']) ? (alerts['sinks'] as unknown[]) : [];
  return sinks.flatMap((s, i) =>
    isObject(s) && (s['format'] === undefined || s['format'] === 'webhook') && noSecret(s)
      ? [{ path: ['alerts', 'sinks', i, 'secret'], message: 'required (non-empty) for a sink of format "webhook": its alerts are signed' }]
      : [],
  );
}

/** `alerts`: sink names are unique (each is the endpoint `sink:NAME`). */
export function checkAlerts(a: unknown, add: AddIssue): void {
  const sinks = isObject(a) && Array.isArray(a['sinks']) ? (a['sinks'] as unknown[]) : [];
  const seen = new Map<string, number>();
  sinks.forEach((s, i) => {
    const name = isObject(s) ? str(s['name']) : undefined;
    if (name === undefined) return;
    const first = seen.get(name);
    if (first !== undefined) add(['sinks', i, 'name'], `duplicate sink name "${name}" (also sinks[${first}])`);
    else seen.set(name, i);
  });
}

/** `topics`: the catalog's keys are topic names (the schemas are compiled where the catalog is written, src/topics/). */
export function checkTopics(t: unknown, add: AddIssue): void {
  const catalog = isObject(t) ? t['catalog'] : undefined;
  if (!isObject(catalog)) return;
  for (const name of Object.keys(catalog)) {
    if (!isValidTopic(name) || name.length > 200)
      add(['catalog', name], `expected a topic name of lowercase dot-separated words like "order.created", got ${JSON.stringify(name)}`);
  }
}

/** `notify.webhook`: the top-level `default` endpoint and the names in `endpoints`. */
export function checkWebhook(w: unknown, add: AddIssue): void {
  if (!isObject(w)) return;
  const hasDefault = (str(w['url']) ?? '') !== '';
  if (hasDefault) checkSecret(w, add);
  const endpoints = Array.isArray(w['endpoints']) ? (w['endpoints'] as unknown[]) : [];
  // An endpoint's own cap above the whole budget could never be reached: a sign of a mix-up.
  const total = w['max_in_flight_total'];
  const overBudget = (v: unknown): boolean =>
    typeof total === 'number' && total >= 1 && total <= 100_000 && typeof v === 'number' && v > total;
  const budgetMessage = (v: unknown) => `must not exceed notify.webhook.max_in_flight_total (${String(total)}), got ${String(v)}`;
  if (overBudget(w['max_in_flight'])) add(['max_in_flight'], budgetMessage(w['max_in_flight']));
  checkConnectTimeouts(w, endpoints, add);
  // A job held by an open circuit must get at least one probe's chance before it expires: one that
  // arrives just after a probe of a long outage waits up to cooldown_max (cooldown is at most that).
  const maxAge = num(w['max_age']);
  const cooldownMax = isObject(w['circuit']) ? num(w['circuit']['cooldown_max']) : undefined;
  if (maxAge !== undefined && cooldownMax !== undefined && maxAge < cooldownMax) {
    add(
      ['max_age'],
      `must not be shorter than notify.webhook.circuit.cooldown_max (${formatDuration(cooldownMax)}), got ${formatDuration(maxAge)}`,
    );
  }
  const seen = new Map<string, number>();
  endpoints.forEach((ep, i) => {
    if (isObject(ep) && overBudget(ep['max_in_flight'])) add(['endpoints', i, 'max_in_flight'], budgetMessage(ep['max_in_flight']));
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
      add(
        ['endpoints', i, 'connect_timeout'],
        `must not exceed this endpoint's timeout (${formatDuration(limit)}), got ${formatDuration(own)}`,
      );
    } else if (own === undefined && connect !== undefined && connect > limit) {
      add(
        ['endpoints', i, 'connect_timeout'],
        `unset, so notify.webhook.connect_timeout (${formatDuration(connect)}) applies, which exceeds this endpoint's timeout ` +
          `(${formatDuration(limit)}): set one of at most ${formatDuration(limit)}`,
      );
    }
  });
}

/** `notify.webhook.circuit`: the first cool-down cannot exceed its cap. */
export function checkCircuit(c: unknown, add: AddIssue): void {
  if (!isObject(c)) return;
  const { cooldown, cooldown_max } = c;
  if (typeof cooldown === 'number' && typeof cooldown_max === 'number' && cooldown > cooldown_max) {
    add(
      ['cooldown'],
      `must not exceed notify.webhook.circuit.cooldown_max (${formatDuration(cooldown_max)}), got ${formatDuration(cooldown)}`,
    );
  }
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
