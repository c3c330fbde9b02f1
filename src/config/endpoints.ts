/** The normalised list of webhook endpoints: what the dispatcher fans out to and workers send to. */
import { blockedRange, parseCidr, SsrfGuard } from '../net/ssrf.js';
import type { Config, Ordering, Scheme, SinkFormat } from './schema.js';

export interface Endpoint {
  /** `default` for the top-level `notify.webhook.url` form. */
  readonly name: string;
  readonly url: string;
  readonly secret: string;
  /**
   * A rotation (docs/operations.md#rotating-a-secret): the new secret, signing alongside `secret`
   * until `rotate_until` (epoch ms), then alone. Both set or neither; webhook/sign.ts signingSecrets
   * reads them at every attempt.
   */
  readonly secret_next?: string;
  readonly rotate_until?: number;
  /** Whitelist: exact topics, `prefix.*`, `*` (see topics.ts). */
  readonly topics: readonly string[];
  /** Per-attempt timeout in milliseconds, from when the request goes out on a connection. */
  readonly timeout: number;
  /** Connect (TCP, TLS) timeout in milliseconds, at most `timeout`. */
  readonly connect_timeout: number;
  readonly max_in_flight: number;
  /** Deliveries per second across all processes; 0: no limit. */
  readonly rate_limit: number;
  readonly scheme: Scheme;
  /** Keyed events (docs/operations.md#ordered-delivery): strict holds a key behind its dead head. Absent: relaxed. */
  readonly ordering?: Ordering;
  readonly headers: Readonly<Record<string, string>>;
  /** False when this endpoint or `notify.webhook.enabled` is off. */
  readonly enabled: boolean;
  /** Where it is defined: the config file (absent means config too) or the endpoints API (stored in PostgreSQL). */
  readonly source?: 'config' | 'api';
  readonly description?: string;
  /** The principal that created a stored endpoint. */
  readonly owner?: string;
  readonly created_at?: string;
  readonly updated_at?: string;
  /**
   * True: every connection is checked by the SSRF guard (docs/operations.md#ssrf-guard). Endpoints
   * stored through the API always are; config endpoints only with `ssrf_guard: true`.
   */
  readonly ssrf_guard: boolean;
  /** `notify.webhook.allow_networks`: CIDRs the guard lets through (the same array for every endpoint). */
  readonly allow_networks: readonly string[];
  /** Send `traceparent` and `tracestate` with each POST (docs/operations.md#tracing); absent: false. */
  readonly propagate_trace?: boolean;
  /** A stored endpoint's own propagate_trace as the API shows it; null: it follows the default. */
  readonly propagate_trace_set?: boolean | null;
  /** Set on the internal endpoint of an alert sink (`sink:NAME`, docs/operations.md#alert-sinks): the format of its bodies. */
  readonly sink?: SinkFormat;
}

export const DEFAULT_ENDPOINT = 'default';

/** The connect timeout when none is configured, or the endpoint's timeout where that is shorter. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

/** The top-level form as `default` (when its url is set), then `endpoints`, with inherited values filled in. */
export function resolveEndpoints(config: Config): Endpoint[] {
  const w = config.notify.webhook;
  const out: Endpoint[] = [];
  if (w.url !== '') {
    out.push({
      name: DEFAULT_ENDPOINT,
      url: w.url,
      secret: w.secret,
      ...rotation(w),
      topics: w.topics,
      timeout: w.timeout,
      connect_timeout: w.connect_timeout ?? Math.min(DEFAULT_CONNECT_TIMEOUT_MS, w.timeout),
      max_in_flight: w.max_in_flight,
      rate_limit: w.rate_limit,
      scheme: w.scheme,
      ordering: w.ordering,
      headers: w.headers,
      enabled: w.enabled,
      ssrf_guard: false,
      allow_networks: w.allow_networks,
      propagate_trace: w.propagate_trace,
    });
  }
  for (const ep of w.endpoints) {
    const timeout = ep.timeout ?? w.timeout;
    out.push({
      name: ep.name,
      url: ep.url,
      secret: ep.secret,
      ...rotation(ep),
      topics: ep.topics,
      timeout,
      connect_timeout: ep.connect_timeout ?? w.connect_timeout ?? Math.min(DEFAULT_CONNECT_TIMEOUT_MS, timeout),
      max_in_flight: ep.max_in_flight ?? w.max_in_flight,
      rate_limit: ep.rate_limit ?? w.rate_limit,
      scheme: ep.scheme,
      ordering: ep.ordering,
      headers: ep.headers,
      // The global switch short-circuits every endpoint, so callers need to check only this flag.
      enabled: w.enabled && ep.enabled,
      ssrf_guard: ep.ssrf_guard,
      allow_networks: w.allow_networks,
      propagate_trace: ep.propagate_trace ?? w.propagate_trace,
    });
  }
  return out;
}

/** The internal endpoint of an alert sink is named this prefix and the sink's name: no customer endpoint name has a colon. */
export const SINK_PREFIX = 'sink:';

export const sinkEndpointName = (sink: string): string => `${SINK_PREFIX}${sink}`;
export const isSinkEndpoint = (endpoint: string | null | undefined): boolean => endpoint?.startsWith(SINK_PREFIX) ?? false;

/**
 * The `alerts.sinks` as internal endpoints (docs/operations.md#alert-sinks): delivered by the
 * queue as any endpoint is (their own circuit, max_in_flight, retries and back-off), but with no
 * topics (no event fans out to them) and never listed with the customer endpoints.
 */
export function resolveSinks(config: Config): Endpoint[] {
  const w = config.notify.webhook;
  return config.alerts.sinks.map((s) => {
    const timeout = s.timeout ?? w.timeout;
    return {
      name: sinkEndpointName(s.name),
      url: s.url,
      secret: s.secret,
      topics: [],
      timeout,
      connect_timeout: Math.min(w.connect_timeout ?? DEFAULT_CONNECT_TIMEOUT_MS, timeout),
      max_in_flight: s.max_in_flight,
      rate_limit: 0,
      scheme: 'acw',
      headers: s.headers,
      enabled: true,
      source: 'config',
      ssrf_guard: s.ssrf_guard,
      allow_networks: w.allow_networks,
      sink: s.format,
    };
  });
}

/** The rotation fields, when both are set; an empty `secret_next` (an unset variable in a command that never signs) is none. */
function rotation(c: { readonly secret_next?: string | undefined; readonly rotate_until?: number | undefined }) {
  return c.secret_next && c.rotate_until !== undefined ? { secret_next: c.secret_next, rotate_until: c.rotate_until } : {};
}

/**
 * What is valid but almost surely a mistake, each naming its key: an enabled endpoint with a URL
 * and no topics never receives an event (its whitelist is empty); one with `ssrf_guard` whose URL
 * the guard refuses (an IP literal or localhost outside `allow_networks`) never delivers; a rotation whose overlap is over. `config check` prints these and
 * the service logs them at start; neither refuses the config.
 */
export function configWarnings(config: Config, nowMs = Date.now()): string[] {
  const w = config.notify.webhook;
  const out: string[] = [];
  // A finished overlap is harmless (secret_next signs alone) but leaves the file saying otherwise.
  const over = (c: { readonly secret_next?: string | undefined; readonly rotate_until?: number | undefined }) =>
    c.secret_next !== undefined && c.rotate_until !== undefined && c.rotate_until <= nowMs;
  const finished = 'has passed: only secret_next signs now; make it the secret and drop secret_next and rotate_until';
  if (w.url !== '' && over(w)) out.push(`notify.webhook.rotate_until: ${finished}`);
  w.endpoints.forEach((ep, i) => {
    if (over(ep)) out.push(`notify.webhook.endpoints[${i}].rotate_until: ${finished}`);
  });
  const sinkGuard = new SsrfGuard({ allowNetworks: w.allow_networks });
  config.alerts.sinks.forEach((s, i) => {
    const refused = s.ssrf_guard ? guardRefusal(sinkGuard, s.url) : null;
    if (refused !== null) out.push(`alerts.sinks[${i}].${refused}: every alert to it will fail (ssrf_guard is on)`);
  });
  if (!w.enabled) return out;
  const empty = 'empty: this endpoint receives no event (list topics, "prefix.*" or "*")';
  if (w.url !== '' && w.topics.length === 0) out.push(`notify.webhook.topics: ${empty}`);
  const opened = openedRanges(w.allow_networks);
  if (opened !== null) out.push(opened);
  const guard = new SsrfGuard({ allowNetworks: w.allow_networks });
  w.endpoints.forEach((ep, i) => {
    if (ep.enabled && ep.topics.length === 0) out.push(`notify.webhook.endpoints[${i}].topics: ${empty}`);
    if (ep.enabled && ep.ssrf_guard) {
      const refused = guardRefusal(guard, ep.url);
      if (refused !== null) out.push(`notify.webhook.endpoints[${i}].${refused}: every delivery will fail (ssrf_guard is on)`);
    }
  });
  return out;
}

/**
 * One warning while `allow_networks` opens loopback, a private range or any other address outside
 * global unicast: whoever may create endpoints can then make the service call into this host or
 * its network. Right for a tour or an internal receiver, worth a line in the log at every start.
 */
function openedRanges(allow: readonly string[]): string | null {
  const opened = allow.flatMap((text) => {
    const cidr = parseCidr(text);
    const range = typeof cidr === 'string' ? null : blockedRange(cidr.network);
    return range === null ? [] : [`${text} (${range.name})`];
  });
  if (opened.length === 0) return null;
  return (
    `notify.webhook.allow_networks: the SSRF guard lets endpoints reach ${opened.join(', ')}: anyone who may create an ` +
    'endpoint can make this service send requests there; keep it for development or a known internal receiver (docs/operations.md#ssrf-guard)'
  );
}

/** The guard's refusal of a config endpoint's URL host (`url: ...`), or null. */
function guardRefusal(guard: SsrfGuard, url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null; // the schema refused it already
  }
  const refused = guard.hostRefusal(parsed);
  return refused === null ? null : `url: ${refused.message}`;
}
