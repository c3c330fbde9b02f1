import { z } from 'zod';
import { JOB_STATUSES } from '../admin/job-view.js';
import { isPrintable } from '../admin/params.js';
import { parseDuration } from '../config/index.js';
import { orderingKey, topicField } from '../notify/input.js';
import { ApiError } from '../errors.js';
import { fromZod } from './errors.js';

/**
 * Request schemas of the HTTP API: strict objects everywhere (an unknown field, query parameter
 * included, is a 400 naming it), query values arriving as strings.
 */

/** Parse one part of a request, or throw the 400 naming the bad field. */
export function parse<S extends z.ZodType>(schema: S, value: unknown, root: string): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw fromZod(r.error, root);
  return r.data;
}

/** The shared notify schemas: what they refuse (NULs, lone surrogates, oversized data) the outbox and the test client refuse too. */
export { notifyInput as notifyBody, notifyBatchInput as notifyBatchBody } from '../notify/input.js';

/** Action routes take no body; `{}` or none at all is fine, anything in it is an unknown field. */
export const emptyBody = z.strictObject({}).optional();
/** Routes that take no query parameters: any given is an unknown field. */
export const emptyQuery = z.strictObject({});

const text = (max = 200) => z.string().min(1).max(max).refine(isPrintable, 'expected printable characters');
const uuid = z.uuid({ error: 'expected a UUID' });
const cursor = z.string().max(200);
const intParam = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,6}$/, `expected an integer from ${min} to ${max}`)
    .describe(`an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
const boolParam = z.stringbool({ truthy: ['true', '1'], falsy: ['false', '0'], error: 'expected true or false' });
/** A database id: digits only, small enough for bigint and exact in a JS number. */
export const idParam = z
  .string()
  .regex(/^\d{1,15}$/, 'expected a non-negative integer id')
  .transform(Number);

export const jobIdParams = z.strictObject({ id: uuid });
export const endpointParams = z.strictObject({ name: text(100) });
export const notificationParams = z.strictObject({ id: idParam });

export const jobsQuery = z.strictObject({
  status: z.enum(JOB_STATUSES as [string, ...string[]]).optional(),
  type: text().optional(),
  topic: topicField.optional(),
  endpoint: text(100).optional(),
  event_id: uuid.optional(),
  limit: intParam(1, 500).optional(),
  cursor: cursor.optional(),
});

export const notificationsQuery = z.strictObject({
  limit: intParam(1, 500).optional(),
  cursor: cursor.optional(),
  unread_only: boolParam.optional(),
});

export const endpointsQuery = z.strictObject({ window_minutes: intParam(1, 10_080).optional() });
export const deleteEndpointQuery = z.strictObject({ force: boolParam.optional() });
/** `overlap`: a duration (1m to 720h, default 24h); `secret`: the new one (generated when absent). Checked by planRotation. */
export const rotateSecretBody = z.strictObject({
  overlap: z.string({ error: 'expected a duration like "24h"' }).max(40).optional(),
  secret: z.string({ error: 'expected a string' }).max(512, { error: 'must be at most 512 characters' }).optional(),
});
export { createEndpointInput as createEndpointBody, updateEndpointInput as updateEndpointBody } from '../endpoints/input.js';

/** `action`: repeated or comma-separated; src/admin/alerts.ts checks each names an alert action. */
const alertAction = z.union([z.string().max(1000), z.array(z.string().max(1000)).max(20)]);
export const alertsStreamQuery = z.strictObject({ since: idParam.optional(), action: alertAction.optional() });
export const alertsQuery = z.strictObject({
  limit: intParam(1, 500).optional(),
  cursor: cursor.optional(),
  action: alertAction.optional(),
  state: z.enum(['open', 'resolved'], { error: 'expected open or resolved' }).optional(),
  acknowledged: boolParam.optional(),
});
export const alertParams = z.strictObject({ id: idParam });
export const ackAlertsBody = z.strictObject({
  up_to: z.int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  action: alertAction.optional(),
});

/** `since`: an RFC 3339 instant, or a Go-style duration meaning that long ago ("1h"). */
const since = z
  .string()
  .max(64)
  .transform((s, ctx) => {
    if (/^\d{4}-\d\d-\d\dT/.test(s)) {
      const d = new Date(s);
      if (!Number.isNaN(d.getTime())) return d;
    } else {
      try {
        return new Date(Date.now() - parseDuration(s));
      } catch {
        // fall through to the issue below
      }
    }
    ctx.addIssue({ code: 'custom', message: 'expected an RFC 3339 time or a duration like "1h"' });
    return z.NEVER;
  });

/** `GET /v1/jobs`: created in a time range as well (the dashboard's filter), each end an instant or a duration ago. */
export const jobsListQuery = jobsQuery.extend({ created_after: since.optional(), created_before: since.optional() });

export const redriveBody = z.strictObject({
  // Optional: dead is the only status a redrive takes, so it is the default.
  status: z.literal('dead', { error: 'expected "dead" (only dead jobs can be redriven)' }).default('dead'),
  topic: topicField.optional(),
  endpoint: text(100).optional(),
  since: since.optional(),
  dry_run: z.boolean().optional(),
});

/** `GET /v1/ordering/blocked`: one endpoint's blocked keys, or every endpoint's. */
export const blockedKeysQuery = z.strictObject({ endpoint: text(100).optional(), limit: intParam(1, 500).optional() });
/** The retry-head and skip-head actions: the blocked key, by endpoint and key. */
export const headActionBody = z.strictObject({ endpoint: text(100), ordering_key: orderingKey });

/** `GET /v1/stats`: the window of the delivery series. */
export const statsQuery = z.strictObject({ window: z.enum(['1h', '24h'], { error: 'expected 1h or 24h' }).optional() });

/** Replay: `since`, `until` and `status` are checked by admin/replay.ts, the same checks as the CLI's. */
export const replayBody = z.strictObject({
  since: z.string({ error: 'required: an RFC 3339 time or a duration like "2h"' }).max(64),
  until: z.string().max(64).optional(),
  status: z.string().max(64).optional(),
  dry_run: z.boolean({ error: 'expected true or false' }).optional(),
  idempotency_key: z.string().min(1).max(200).refine(isPrintable, 'expected printable characters').optional(),
});

/** Dashboard sign-in: an admin or viewer token, traded for a session cookie. */
export const signInBody = z.strictObject({ token: z.string().min(1, 'expected the API token').max(512, 'too long for a token') });

/** The `Last-Event-ID` header of a reconnecting SSE client. */
export function lastEventId(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !/^\d{1,15}$/.test(header)) {
    throw new ApiError(400, 'invalid_input', 'last-event-id: expected the id of an alert event', { field: 'last-event-id' });
  }
  return Number(header);
}
