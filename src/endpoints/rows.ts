import type { Config, Endpoint } from '../config/index.js';
import { DEFAULT_CONNECT_TIMEOUT_MS } from '../config/endpoints.js';
import { rateLimit } from '../config/fields.js';
import type { Queryable } from '../db/pool.js';
import { openHeaders, secretContext, type SecretCodec } from './codec.js';

/** A row of `endpoints` (migrations/0006_endpoints.sql), its secrets and header values sealed. */
export interface StoredRow {
  name: string;
  url: string;
  topics: string[];
  scheme: 'acw' | 'standard';
  ordering: 'relaxed' | 'strict';
  /** Send traceparent/tracestate with each POST; null: notify.webhook.propagate_trace (migrations/0017). */
  propagate_trace: boolean | null;
  /** Names as given; values sealed when `headers_sealed`, else plain (a row from before migrations/0009, until sealed). */
  headers: Record<string, string>;
  headers_sealed: boolean;
  timeout_ms: number | null;
  max_in_flight: number | null;
  rate_limit: string | null;
  enabled: boolean;
  description: string;
  secret: string;
  secret_next: string | null;
  rotate_until: Date | null;
  owner: string;
  created_at: Date;
  updated_at: Date;
}

export const COLUMNS = `name, url, topics, scheme, ordering, propagate_trace, headers, headers_sealed, timeout_ms, max_in_flight, rate_limit, enabled, description,
  secret, secret_next, rotate_until, owner, created_at, updated_at`;

/** Every live stored endpoint, by name. */
export async function readStoredEndpoints(db: Queryable): Promise<StoredRow[]> {
  const res = await db.query<StoredRow>(`select ${COLUMNS} from endpoints where deleted_at is null order by name`);
  return res.rows;
}

/** A cheap fingerprint of the table: it changes with every insert, update and delete (tombstone). */
export async function storedVersion(db: Queryable): Promise<string> {
  const res = await db.query<{ v: string }>(`select count(*)::text || ':' || coalesce(max(updated_at)::text, '') as v from endpoints`);
  return res.rows[0]?.v ?? '';
}

/**
 * A stored row as the service uses it, with this process's notify.webhook defaults filled in, its
 * secrets and header values opened (throws when one does not open: the registry then holds it).
 */
export function toEndpoint(row: StoredRow, config: Config, codec: SecretCodec): Endpoint {
  const w = config.notify.webhook;
  const timeout = row.timeout_ms ?? w.timeout;
  const rate = row.rate_limit === null ? w.rate_limit : rateLimit().parse(row.rate_limit);
  const next =
    row.secret_next !== null && row.rotate_until !== null ? codec.open(row.secret_next, secretContext(row.name, 'secret_next')) : undefined;
  return {
    name: row.name,
    url: row.url,
    secret: codec.open(row.secret, secretContext(row.name, 'secret')),
    ...(next !== undefined && row.rotate_until ? { secret_next: next, rotate_until: row.rotate_until.getTime() } : {}),
    topics: row.topics,
    timeout,
    connect_timeout: Math.min(w.connect_timeout ?? DEFAULT_CONNECT_TIMEOUT_MS, timeout),
    max_in_flight: Math.min(row.max_in_flight ?? w.max_in_flight, w.max_in_flight_total),
    rate_limit: rate,
    scheme: row.scheme,
    ordering: row.ordering,
    // An unsealed row (written before migrations/0009) keeps working until a process seals it (./seal-headers.ts).
    headers: row.headers_sealed ? openHeaders(codec, row.name, row.headers) : row.headers,
    enabled: w.enabled && row.enabled,
    source: 'api',
    description: row.description,
    owner: row.owner,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    // Anyone with a token may point a stored endpoint anywhere: every connection is checked (docs/operations.md#ssrf-guard).
    ssrf_guard: true,
    allow_networks: w.allow_networks,
    // Null on the row: the default for every endpoint, read from this process's config.
    propagate_trace: row.propagate_trace ?? w.propagate_trace,
    propagate_trace_set: row.propagate_trace,
  };
}

/** Tombstones older than the retention: their names are free again (run by the purge). */
export async function purgeTombstones(db: Queryable, retentionMs: number): Promise<number> {
  const res = await db.query(`delete from endpoints where deleted_at is not null and deleted_at < now() - $1 * interval '1 millisecond'`, [
    retentionMs,
  ]);
  return res.rowCount ?? 0;
}
