/**
 * The route registry: every operation of the HTTP API under its stable `operationId`, with its
 * method, path, who may call it, the schemas of its request and of each answer it gives. The routes
 * register through it (src/http/route.ts: the roles, the request checks, the serializers), the
 * OpenAPI document and docs/api.md are generated from it (document.ts), and a test compares it
 * with the routes fastify serves, so a route added without an entry fails. Errors every route of a
 * kind can give (400, 401, 403, 413, 415, 500, 503) are added by document.ts; `errors` lists the
 * others a route gives, with what they mean there.
 */
import { ACCESS } from '../../roles.js';
import {
  alertsQuery,
  alertsStreamQuery,
  alertParams,
  blockedKeysQuery,
  headActionBody,
  ackAlertsBody,
  emptyBody,
  jobIdParams,
  jobsListQuery,
  notificationParams,
  notificationsQuery,
  notifyBatchBody,
  notifyBody,
  redriveBody,
  signInBody,
  statsQuery,
} from '../schemas.js';
import * as A from './answers.js';
import { ENDPOINT_OPERATIONS } from './endpoint-routes.js';
import { TOPIC_OPERATIONS } from './topic-routes.js';
import { json, type RouteDoc } from './route-doc.js';

export type { Answer, RouteDoc } from './route-doc.js';

/** Every operation, by operationId (stable: clients generated from the document call them by it), in the docs' order. */
export const OPERATIONS = {
  liveness: {
    method: 'GET',
    url: '/healthz',
    summary: 'Liveness: the process answers',
    worker: true,
    answers: { 200: json('`{"status":"ok"}`', A.livenessAnswer) },
  },
  readiness: {
    method: 'GET',
    url: '/readyz',
    summary: 'Readiness: the database answers and every migration is applied',
    worker: true,
    answers: {
      200: json('ready', A.readyAnswer),
      503: json('not ready: the database does not answer, or migrations are pending or unknown', A.notReadyAnswer),
    },
  },
  metrics: {
    method: 'GET',
    url: '/metrics',
    summary: 'Prometheus metrics',
    worker: true,
    answers: { 200: { description: 'Prometheus text exposition format', contentType: 'text/plain' } },
  },
  openapi: {
    method: 'GET',
    url: '/openapi.json',
    summary: 'This OpenAPI document',
    answers: { 200: { description: 'OpenAPI 3.1 JSON', contentType: 'application/json' } },
  },
  asyncapi: {
    method: 'GET',
    url: '/asyncapi.json',
    summary: 'An AsyncAPI 3.0 document of the topic catalog: one channel per topic, its payload schema, examples and headers',
    answers: { 200: { description: 'AsyncAPI 3.0 JSON (docs/receivers.md#topics)', contentType: 'application/json' } },
  },
  dashboard: {
    method: 'GET',
    url: '/',
    summary: 'The operator dashboard (docs/operations.md#dashboard): its page, under a strict Content-Security-Policy',
    answers: {
      200: { description: 'the dashboard HTML', contentType: 'text/html' },
      503: { description: 'the dashboard is not built (`npm run build`)', contentType: 'text/plain' },
    },
  },
  dashboardAsset: {
    method: 'GET',
    url: '/assets/*',
    summary: "The dashboard's scripts, styles and fonts, built into the package",
    answers: {
      200: { description: 'a static file (content-hashed names, cached for a year)', contentType: 'application/octet-stream' },
    },
    errors: { 404: 'no such file in the built dashboard' },
  },
  signIn: {
    method: 'POST',
    url: '/v1/session',
    summary: 'Sign in to the dashboard: trade an admin or viewer token for a session cookie',
    body: signInBody,
    noBodyIsEmpty: true,
    answers: {
      200: {
        description: 'the user, and an HttpOnly `acw_session` cookie',
        schema: A.sessionAnswer,
        headers: { 'Set-Cookie': '`acw_session=…; Path=/; HttpOnly; SameSite=Strict` (and `Secure` behind https)' },
      },
    },
    errors: {
      401: 'unknown or revoked token',
      403: 'a service token (only admin and viewer tokens sign in), or a request from another site',
    },
  },
  getSession: {
    method: 'GET',
    url: '/v1/session',
    summary: 'Who is signed in (the session cookie or the bearer token)',
    access: 'any',
    answers: { 200: json('the user (and when its session ends)', A.sessionAnswer) },
  },
  signOut: {
    method: 'DELETE',
    url: '/v1/session',
    summary: 'Sign out: the session is deleted and its cookie cleared',
    answers: { 204: { description: 'signed out (also without a session): the cookie is cleared' } },
    errors: { 403: 'a request from another site' },
  },
  listProcesses: {
    method: 'GET',
    url: '/v1/workers',
    summary: 'The serve and worker processes: host, pid, version, started, last seen (gone when stale), in-flight deliveries, runners',
    access: ACCESS.read,
    answers: { 200: json('newest seen first', A.processList) },
  },
  getStats: {
    method: 'GET',
    url: '/v1/stats',
    summary: "The dashboard overview's numbers: queue depth by status, deliveries and failures per minute, the oldest due job",
    access: ACCESS.read,
    query: statsQuery,
    answers: { 200: json('the counts and per-minute series over `window` (1h or 24h)', A.statsAnswer) },
  },
  notify: {
    method: 'POST',
    url: '/v1/notify',
    summary: 'Notify one event: one webhook job per endpoint whose topics match',
    access: ACCESS.notify,
    body: notifyBody,
    headers: {
      'Idempotency-Key': {
        description: 'the idempotency key, bare (`k-1`) or as a quoted string (`"k-1"`); the same as `idempotency_key` when both are given',
        schema: notifyBody.shape.idempotency_key,
      },
    },
    answers: {
      202: json('accepted: the event and its jobs are stored', A.notifyAnswer),
      200: json(
        'the idempotency key was used before with the same request: its first answer, `replayed: true`; nothing written',
        A.notifyAnswer,
      ),
    },
    errors: {
      409: 'the idempotency key was used before with a different request',
      413: 'the event data is larger than 256 KiB',
    },
  },
  notifyBatch: {
    method: 'POST',
    url: '/v1/notify/batch',
    summary: 'Notify up to 1,000 events, all or none',
    access: ACCESS.notify,
    body: notifyBatchBody,
    answers: {
      202: json('accepted: every event and its jobs are stored', A.notifyBatchAnswer),
      200: json('every event was a replay of an earlier call: nothing written', A.notifyBatchAnswer),
    },
    errors: {
      409: 'an idempotency key was used before with a different request (`details.fields` names each event)',
      413: "an event's data is larger than 256 KiB",
    },
  },
  listJobs: {
    method: 'GET',
    url: '/v1/jobs',
    summary: 'List jobs, newest first',
    access: ACCESS.read,
    query: jobsListQuery,
    answers: { 200: json('a page of jobs; pass `next_cursor` as `cursor` for the next', A.jobPage) },
  },
  getJob: {
    method: 'GET',
    url: '/v1/jobs/:id',
    summary: 'One job with every delivery attempt',
    access: ACCESS.read,
    params: jobIdParams,
    answers: { 200: json('the job, its payload and its attempts', A.jobDetailAnswer) },
    errors: { 404: 'no job with this id' },
  },
  retryJob: {
    method: 'POST',
    url: '/v1/jobs/:id/retry',
    summary: 'A dead, completed or cancelled job again, as a fresh attempt series',
    access: ACCESS.admin,
    params: jobIdParams,
    body: emptyBody,
    answers: { 200: json('the job, pending again', A.jobAnswer) },
    errors: { 404: 'no job with this id', 409: 'the job is pending or running' },
  },
  cancelJob: {
    method: 'POST',
    url: '/v1/jobs/:id/cancel',
    summary: 'Cancel a pending job',
    access: ACCESS.admin,
    params: jobIdParams,
    body: emptyBody,
    answers: { 200: json('the job, cancelled', A.jobAnswer) },
    errors: { 404: 'no job with this id', 409: 'the job is not pending' },
  },
  redriveJobs: {
    method: 'POST',
    url: '/v1/jobs/redrive',
    summary: 'Every dead job matching the filter, re-queued',
    access: ACCESS.admin,
    body: redriveBody,
    answers: { 200: json('how many were re-queued (with `dry_run: true`: how many match)', A.redriveAnswer) },
  },
  listBlockedKeys: {
    method: 'GET',
    url: '/v1/ordering/blocked',
    summary: 'Ordering keys held behind their dead head (strict endpoints), the longest blocked first',
    access: ACCESS.read,
    query: blockedKeysQuery,
    answers: { 200: json('the blocked keys, each with its head and its last error', A.blockedKeyList) },
  },
  retryKeyHead: {
    method: 'POST',
    url: '/v1/ordering/blocked/retry-head',
    summary: "Send a blocked key's dead head again, first; the key goes on once it is delivered",
    access: ACCESS.admin,
    body: headActionBody,
    answers: { 200: json('the head, pending again', A.headActionAnswer) },
    errors: { 404: 'the endpoint has no such key', 409: 'the key is not blocked' },
  },
  skipKeyHead: {
    method: 'POST',
    url: '/v1/ordering/blocked/skip-head',
    summary: "Leave a blocked key's dead head dead (or a head deleted by hand gone) and let the key's next event go",
    access: ACCESS.admin,
    body: headActionBody,
    answers: { 200: json('the head, skipped', A.headActionAnswer) },
    errors: { 404: 'the endpoint has no such key', 409: 'the key is not blocked, and its head is live' },
  },
  ...ENDPOINT_OPERATIONS,
  ...TOPIC_OPERATIONS,
  listNotifications: {
    method: 'GET',
    url: '/v1/notifications',
    summary: "The caller's in-app notifications",
    access: 'any',
    query: notificationsQuery,
    answers: { 200: json('a page of notifications, newest first', A.notificationPage) },
  },
  markNotificationRead: {
    method: 'POST',
    url: '/v1/notifications/:id/read',
    summary: 'Mark one notification read',
    access: 'any',
    params: notificationParams,
    body: emptyBody,
    answers: { 200: json('the notification', A.notificationAnswer) },
    errors: { 404: 'no notification of the caller with this id' },
  },
  listAlerts: {
    method: 'GET',
    url: '/v1/alerts',
    summary: 'Dead letters and endpoint alerts, newest first',
    access: ACCESS.read,
    query: alertsQuery,
    answers: { 200: json('a page of alerts', A.alertPage) },
  },
  acknowledgeAlert: {
    method: 'POST',
    url: '/v1/alerts/:id/ack',
    summary: 'Acknowledge one alert (it resolves too unless its condition lasts)',
    access: ACCESS.admin,
    params: alertParams,
    body: emptyBody,
    answers: { 200: json('the alert', A.alertAnswer) },
    errors: { 404: 'no alert with this id' },
  },
  acknowledgeAlerts: {
    method: 'POST',
    url: '/v1/alerts/ack',
    summary: 'Acknowledge every alert up to an id (default: the newest now), of some actions if given',
    access: ACCESS.admin,
    body: ackAlertsBody,
    noBodyIsEmpty: true,
    answers: { 200: json('how many were acknowledged, and up to which id', A.ackAlertsAnswer) },
  },
  streamAlerts: {
    method: 'GET',
    url: '/v1/alerts/stream',
    summary: 'Alerts as server-sent events (`Last-Event-ID` resumes)',
    access: ACCESS.read,
    query: alertsStreamQuery,
    headers: {
      'Last-Event-ID': {
        description: 'the id of the last alert seen: the stream replays from after it (an EventSource sends it when it reconnects)',
        schema: notificationParams.shape.id,
      },
    },
    answers: {
      200: {
        description: 'an event stream: per alert, `id:` its id, `event:` its action and one `data:` line of its JSON (an Alert)',
        contentType: 'text/event-stream',
      },
    },
  },
} as const satisfies Record<string, RouteDoc>;

export type OperationId = keyof typeof OPERATIONS;

/** The registry as a list, each entry with its operationId. */
export const ROUTES: ReadonlyArray<RouteDoc & { operationId: OperationId }> = Object.entries(OPERATIONS).map(([operationId, r]) => ({
  operationId: operationId as OperationId,
  ...(r as RouteDoc),
}));
