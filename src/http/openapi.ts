/**
 * The route -> schema registry: every route of the HTTP API with its method, path, roles, schemas and
 * summary. Routes validate with `parse(schema, ...)` rather than fastify's schema option, so this list
 * names each route's schemas explicitly; a test compares it with the routes fastify has, so a route
 * added without an entry fails. openapi-document.ts builds the OpenAPI document (served at
 * /openapi.json) and docs/api.md from it.
 */
import { z } from 'zod';
import {
  alertsQuery,
  alertsStreamQuery,
  createEndpointBody,
  deleteEndpointQuery,
  emptyBody,
  emptyQuery,
  endpointParams,
  endpointsQuery,
  jobIdParams,
  jobsListQuery,
  notificationParams,
  notificationsQuery,
  notifyBatchBody,
  notifyBody,
  redriveBody,
  rotateSecretBody,
  updateEndpointBody,
} from './schemas.js';
import { replayBody } from './routes/replay.js';
import { signInBody } from './routes/sessions.js';
import { statsQuery } from './routes/stats.js';

type Role = 'admin' | 'viewer' | 'service';

export interface RouteDoc {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Fastify's path, `:name` parameters included. */
  url: string;
  summary: string;
  /** Who may call it; absent: public (no token). `any`: every authenticated user. */
  roles?: readonly Role[] | 'any';
  /** `serve` only, or on `worker` too. */
  worker?: boolean;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  /** The success status and what it answers (responses are not schema-checked). */
  ok: { status: number; description: string; contentType?: string };
}

const READ: readonly Role[] = ['viewer', 'admin'];
const READ_OR_SERVICE: readonly Role[] = ['viewer', 'admin', 'service'];
const ADMIN: readonly Role[] = ['admin'];
const SERVICE: readonly Role[] = ['service', 'admin'];
const WRITE: readonly Role[] = ['admin', 'service'];

/** Every route of the HTTP API, in the order the docs list them. */
export const ROUTES: readonly RouteDoc[] = [
  {
    method: 'GET',
    url: '/healthz',
    summary: 'Liveness: the process answers',
    worker: true,
    ok: { status: 200, description: '`{"status":"ok"}`' },
  },
  {
    method: 'GET',
    url: '/readyz',
    summary: 'Readiness: the database answers and every migration is applied',
    worker: true,
    ok: { status: 200, description: '`{"status":"ready"}`; 503 `{"status":"not_ready","reason":…}` otherwise' },
  },
  {
    method: 'GET',
    url: '/metrics',
    summary: 'Prometheus metrics',
    worker: true,
    ok: { status: 200, description: 'Prometheus text exposition format', contentType: 'text/plain' },
  },
  { method: 'GET', url: '/openapi.json', summary: 'This OpenAPI document', ok: { status: 200, description: 'OpenAPI 3.1 JSON' } },
  {
    method: 'GET',
    url: '/',
    summary: 'The operator dashboard (docs/operations.md#dashboard): its page, under a strict Content-Security-Policy',
    ok: { status: 200, description: 'the dashboard HTML', contentType: 'text/html' },
  },
  {
    method: 'GET',
    url: '/assets/*',
    summary: "The dashboard's scripts, styles and fonts, built into the package",
    ok: { status: 200, description: 'a static file (content-hashed names, cached for a year)', contentType: 'application/octet-stream' },
  },
  {
    method: 'POST',
    url: '/v1/session',
    summary: 'Sign in to the dashboard: trade an admin or viewer token for a session cookie',
    body: signInBody,
    ok: { status: 200, description: '`{user, role, expires_at}` and an HttpOnly `acw_session` cookie; 401 for a bad token' },
  },
  {
    method: 'GET',
    url: '/v1/session',
    summary: 'Who is signed in (the session cookie or the bearer token)',
    roles: 'any',
    ok: { status: 200, description: '`{user, role, expires_at}`' },
  },
  {
    method: 'DELETE',
    url: '/v1/session',
    summary: 'Sign out: the session is deleted and its cookie cleared',
    ok: { status: 200, description: '`{signed_out: true}`' },
  },
  {
    method: 'GET',
    url: '/v1/workers',
    summary: 'The serve and worker processes: host, pid, version, started, last seen (gone when stale), in-flight deliveries, runners',
    roles: READ,
    query: emptyQuery,
    ok: { status: 200, description: '`{now, items}`, newest seen first' },
  },
  {
    method: 'GET',
    url: '/v1/stats',
    summary: "The dashboard overview's numbers: queue depth by status, deliveries and failures per minute, the oldest due job",
    roles: READ,
    query: statsQuery,
    ok: { status: 200, description: 'the counts and per-minute series over `window` (1h or 24h)' },
  },
  {
    method: 'POST',
    url: '/v1/notify',
    summary: 'Notify one event: one webhook job per endpoint whose topics match',
    roles: SERVICE,
    body: notifyBody,
    ok: {
      status: 202,
      description:
        '`{event_id, job_ids, replayed: false}`; 200 with `replayed: true` for a repeated idempotency key; a `warning` when no process running jobs has been seen in the last minute',
    },
  },
  {
    method: 'POST',
    url: '/v1/notify/batch',
    summary: 'Notify up to 1,000 events, all or none',
    roles: SERVICE,
    body: notifyBatchBody,
    ok: { status: 202, description: '`{results: [{event_id, job_ids, replayed}, …]}`; 200 when every event was a replay' },
  },
  {
    method: 'GET',
    url: '/v1/jobs',
    summary: 'List jobs, newest first',
    roles: READ,
    query: jobsListQuery,
    ok: { status: 200, description: '`{items, next_cursor}`; pass `next_cursor` as `cursor` for the next page' },
  },
  {
    method: 'GET',
    url: '/v1/jobs/:id',
    summary: 'One job with every delivery attempt',
    roles: READ,
    params: jobIdParams,
    ok: { status: 200, description: 'the job; 404 when there is none' },
  },
  {
    method: 'POST',
    url: '/v1/jobs/:id/retry',
    summary: 'A dead, completed or cancelled job again, as a fresh attempt series',
    roles: ADMIN,
    params: jobIdParams,
    body: emptyBody,
    ok: { status: 200, description: 'the job' },
  },
  {
    method: 'POST',
    url: '/v1/jobs/:id/cancel',
    summary: 'Cancel a pending job',
    roles: ADMIN,
    params: jobIdParams,
    body: emptyBody,
    ok: { status: 200, description: 'the job' },
  },
  {
    method: 'POST',
    url: '/v1/jobs/redrive',
    summary: 'Every dead job matching the filter, re-queued',
    roles: ADMIN,
    body: redriveBody,
    ok: { status: 200, description: '`{count}` (with `dry_run: true`: how many match)' },
  },
  {
    method: 'GET',
    url: '/v1/endpoints',
    summary: 'Every endpoint: circuit, pause, held jobs, rate limit, recent health',
    roles: READ_OR_SERVICE,
    query: endpointsQuery,
    ok: { status: 200, description: '`{items: [endpoint view, …]}`' },
  },
  {
    method: 'GET',
    url: '/v1/endpoints/:name',
    summary: "One endpoint's view",
    roles: READ_OR_SERVICE,
    params: endpointParams,
    ok: { status: 200, description: 'the endpoint; 404 when there is none' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints',
    summary: 'Create a stored endpoint; its secret is answered once',
    roles: WRITE,
    body: createEndpointBody,
    ok: { status: 201, description: 'the endpoint, with `secret`' },
  },
  {
    method: 'PATCH',
    url: '/v1/endpoints/:name',
    summary: 'Change a stored endpoint',
    roles: WRITE,
    params: endpointParams,
    body: updateEndpointBody,
    ok: { status: 200, description: 'the endpoint' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints/:name/rotate-secret',
    summary: 'A new secret, signing beside the old one until the overlap ends',
    roles: WRITE,
    params: endpointParams,
    body: rotateSecretBody,
    ok: {
      status: 200,
      description: '`{name, secret_next, rotate_until, generated}`: the new secret, answered once; 409 during an overlap',
    },
  },
  {
    method: 'DELETE',
    url: '/v1/endpoints/:name',
    summary: 'Delete a stored endpoint (`force`: cancelling its pending jobs)',
    roles: WRITE,
    params: endpointParams,
    query: deleteEndpointQuery,
    ok: { status: 200, description: '`{name, deleted: true, cancelled_jobs}`' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints/:name/test',
    summary: 'Send a test delivery',
    roles: ADMIN,
    params: endpointParams,
    body: emptyBody,
    ok: { status: 202, description: '`{event_id, job_ids}` of the test delivery' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints/:name/pause',
    summary: 'Stop delivering to it in every process; its jobs wait, pending',
    roles: ADMIN,
    params: endpointParams,
    body: emptyBody,
    ok: { status: 200, description: 'the endpoint, with `changed`' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints/:name/resume',
    summary: 'Deliver again (an open circuit is probed at once)',
    roles: ADMIN,
    params: endpointParams,
    body: emptyBody,
    ok: { status: 200, description: 'the endpoint, with `changed`' },
  },
  {
    method: 'POST',
    url: '/v1/endpoints/:name/replay',
    summary: "An endpoint's jobs of a window again, same ids",
    roles: ADMIN,
    params: endpointParams,
    body: replayBody,
    ok: { status: 200, description: '`{endpoint, status, window, reset, created, …}` (with `dry_run: true`: what would be)' },
  },
  {
    method: 'GET',
    url: '/v1/notifications',
    summary: "The caller's in-app notifications",
    roles: 'any',
    query: notificationsQuery,
    ok: { status: 200, description: '`{items, next_cursor}`' },
  },
  {
    method: 'POST',
    url: '/v1/notifications/:id/read',
    summary: 'Mark one notification read',
    roles: 'any',
    params: notificationParams,
    body: emptyBody,
    ok: { status: 200, description: 'the notification' },
  },
  {
    method: 'GET',
    url: '/v1/alerts',
    summary: 'Dead letters and endpoint alerts, newest first',
    roles: READ,
    query: alertsQuery,
    ok: { status: 200, description: '`{items, next_cursor}`' },
  },
  {
    method: 'GET',
    url: '/v1/alerts/stream',
    summary: 'Alerts as server-sent events (`Last-Event-ID` resumes)',
    roles: READ,
    query: alertsStreamQuery,
    ok: { status: 200, description: 'an event stream, one `data:` line of JSON per alert', contentType: 'text/event-stream' },
  },
];
