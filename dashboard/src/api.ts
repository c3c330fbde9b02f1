// The dashboard speaks only the public /v1 API, with its session cookie (never a token in the page).

export interface Me {
  user: { name: string; role: 'admin' | 'viewer' | 'service' };
  expires_at?: string;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface Job {
  id: string;
  type: string;
  status: 'pending' | 'running' | 'completed' | 'dead' | 'cancelled';
  attempts: number;
  max_attempts: number;
  run_at: string;
  last_error: string | null;
  created_at: string;
  completed_at: string | null;
  topic: string | null;
  endpoint: string | null;
  event_id: string | null;
}

export interface Attempt {
  attempt: number;
  status_code: number | null;
  error_kind: string | null;
  error: string | null;
  duration_ms: number;
  response_body: string | null;
  created_at: string;
}

export interface JobDetail extends Job {
  payload?: unknown;
  deliveries: Attempt[];
}

export interface Endpoint {
  /** config: the config file; api: created through POST /v1/endpoints. */
  source: 'config' | 'api';
  name: string;
  url: string;
  topics: string[];
  enabled: boolean;
  description: string;
  scheme: 'acw' | 'standard';
  timeout_ms: number;
  max_in_flight: number;
  /** Deliveries per second across all processes; null: none. */
  rate_limit: number | null;
  /** A secret rotation under way until then; null: none. */
  rotate_until: string | null;
  attempts: number;
  success_rate: number | null;
  p50_duration_ms: number | null;
  p99_duration_ms: number | null;
  last_error: string | null;
  last_error_at: string | null;
  paused: boolean;
  paused_by: string | null;
  circuit: {
    state: 'closed' | 'open' | 'half_open' | string;
    since: string | null;
    next_probe_at: string | null;
    consecutive_failures: number;
  };
  in_flight: number | null;
  held_jobs: number;
  window_minutes: number;
}

export interface Alert {
  id: number;
  action: string;
  created_at: string;
  [detail: string]: unknown;
}

export interface Notification {
  id: number;
  topic: string;
  data: unknown;
  read_at: string | null;
  created_at: string;
}

export interface Stats {
  now: string;
  queue: Record<string, number>;
  oldest_due: { run_at: string; age_seconds: number } | null;
  deliveries: {
    window: string;
    bucket_seconds: number;
    total: number;
    failed: number;
    failure_rate: number;
    per_minute: number;
    buckets: Array<{ at: string; ok: number; failed: number }>;
  };
}

/** A refusal from the API, with the field it names when it names one. */
export class ApiFail extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

let unauthorized: () => void = () => undefined;
/** Called when a request finds the session gone (expired, signed out, user revoked). */
export function onUnauthorized(f: () => void): void {
  unauthorized = f;
}

export async function api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (method === 'POST' || method === 'PATCH') {
    init.headers = { ...init.headers, 'content-type': 'application/json' };
    init.body = JSON.stringify(body ?? {});
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch {
    throw new ApiFail(0, 'network', 'The server cannot be reached; check that acw-webhooks serve is running.');
  }
  if (res.status === 204) return undefined as T;
  let data: unknown = null;
  try {
    data = await res.json();
  } catch {
    // not JSON: described below
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string; details?: { field?: string } } } | null)?.error;
    const fail = new ApiFail(res.status, e?.code ?? 'error', e?.message ?? `The server answered ${res.status}.`, e?.details?.field);
    if (res.status === 401 && path !== 'v1/session') unauthorized();
    throw fail;
  }
  return data as T;
}

/** A query string from the set values only. */
export function qs(params: Record<string, string | number | undefined | null>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

export const ALERT_ACTIONS = [
  'webhook.dead_letter',
  'job.dead_letter',
  'endpoint.circuit_opened',
  'endpoint.circuit_closed',
  'endpoint.expired',
] as const;
