// The dashboard speaks only the public /v1 API, with its session cookie (never a token in the page).
import type { z } from 'zod';
import type * as A from '../../src/http/contract/answers.js';
import type * as TA from '../../src/http/contract/topic-answers.js';

// The answers' types are the server's own schemas (src/http/contract/answers.ts), imported as types
// only: nothing of the server enters the bundle.
export type Me = z.infer<typeof A.sessionAnswer>;
/** A page of a list: `next_cursor` null on the last. */
export type Page<T> = { items: T[]; next_cursor: z.infer<typeof A.jobPage>['next_cursor'] };
export type Job = z.infer<typeof A.jobAnswer>;
export type Attempt = z.infer<typeof A.attemptAnswer>;
export type JobDetail = z.infer<typeof A.jobDetailAnswer>;
export type Endpoint = z.infer<typeof A.endpointAnswer>;
export type Alert = z.infer<typeof A.alertAnswer>;
export type Notification = z.infer<typeof A.notificationAnswer>;
export type Stats = z.infer<typeof A.statsAnswer>;
export type WorkerProcess = z.infer<typeof A.processAnswer>;
export type ReplayAnswer = z.infer<typeof A.replayAnswer>;
export type Topic = z.infer<typeof TA.topicAnswer>;
export type BlockedKey = z.infer<typeof A.blockedKey>;

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

/** The alert filter's choices: a value the page needs at run time, checked against the server's list by type. */
export const ALERT_ACTIONS = [
  'webhook.dead_letter',
  'job.dead_letter',
  'endpoint.circuit_opened',
  'endpoint.circuit_closed',
  'endpoint.expired',
  'endpoint.failing',
  'endpoint.failing_resolved',
  'topic.event_rejected',
  'webhook.key_blocked',
] as const satisfies readonly Alert['action'][];
// Every action the server has is offered: a new one fails to compile here until it is added above.
type OnlyNever<T extends never> = T;
export type UnofferedAlertActions = OnlyNever<Exclude<Alert['action'], (typeof ALERT_ACTIONS)[number]>>;
