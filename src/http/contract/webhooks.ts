/**
 * The webhooks we send, as OpenAPI 3.1's top-level `webhooks`: what a receiver gets and which of its
 * answers we act on how, so receiver teams can generate their handler's types. docs/receivers.md is
 * the protocol in prose; test/http/contract.test.ts checks a real delivery against this.
 */
import { z } from 'zod';
import { jsonSchema, type Json } from './json-schema.js';

/** The body of every delivery: one line of compact JSON, members in this order. */
export const deliveryBody = z.object({
  event_id: z.guid().describe("the event's UUID: one event sent to three endpoints has one event_id and three deliveries"),
  topic: z.string().describe('the topic it was notified under (also in X-ACW-Topic)'),
  occurred_at: z.iso.datetime().describe('when it was notified, RFC 3339 in UTC with milliseconds'),
  data: z.unknown().describe('the JSON the sender notified (null when none)'),
});

const header = (description: string, schema: Json, required = true): Json => ({ description, required, schema });
const digits = { type: 'string', pattern: '^[0-9]+$' };

const COMMON_HEADERS: Record<string, Json> = {
  'User-Agent': header('`acw-webhooks/<version>`', { type: 'string' }),
  'X-ACW-Topic': header('the topic', { type: 'string' }),
  'X-ACW-Schema-Version': header(
    "only for a topic of the catalog: the version of its schema the data was validated against (each topic's own entry below, and GET /asyncapi.json, have its schema)",
    digits,
    false,
  ),
  'X-ACW-Ordering-Key': header(
    "only for an event notified with an `ordering_key`: the key, percent-encoded (UTF-8) when it has a character outside printable ASCII or a `%` (decodeURIComponent gives the key either way). The key's deliveries to this endpoint come one at a time, in order",
    { type: 'string', minLength: 1 },
    false,
  ),
  'X-ACW-Sequence': header(
    "with X-ACW-Ordering-Key: the event's number within its key for this endpoint (1, 2, 3, ...), kept by retries and replays: a gap or a repeat shows",
    digits,
    false,
  ),
};

/** Scheme `acw` (the default): our HMAC headers. */
const ACW_HEADERS: Record<string, Json> = {
  ...COMMON_HEADERS,
  'X-ACW-Event-Id': header('the UUID of this delivery job (one per event and endpoint), the same on every retry of it: deduplicate on it', {
    type: 'string',
    format: 'uuid',
  }),
  'X-ACW-Timestamp': header('Unix seconds when this attempt was signed', digits),
  'X-ACW-Signature': header('`sha256=` and the lower-case hex HMAC-SHA256 of `<X-ACW-Timestamp>.<body>` with the secret', {
    type: 'string',
    pattern: '^sha256=[0-9a-f]{64}$',
  }),
  'X-ACW-Signature-Next': header(
    'only during a secret rotation: the same HMAC with the new secret (X-ACW-Signature keeps the old one)',
    { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
    false,
  ),
};

/** Scheme `standard`: Standard Webhooks (https://www.standardwebhooks.com/) instead of the X-ACW signature headers. */
const STANDARD_HEADERS: Record<string, Json> = {
  ...COMMON_HEADERS,
  'webhook-id': header("the job's UUID, the same on every retry: deduplicate on it", { type: 'string', format: 'uuid' }),
  'webhook-timestamp': header('Unix seconds when this attempt was signed', digits),
  'webhook-signature': header(
    '`v1,<base64 HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<body> with the key of the whsec_ secret>`; during a rotation two, space-separated (old first)',
    { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)?$' },
  ),
};

const retryAfter = {
  'Retry-After': {
    description: 'seconds or an HTTP date: honoured (up to the retry limits)',
    schema: { type: 'string' },
  },
};

/** The answers we act on (docs/receivers.md#what-your-answer-means-to-us); the body is kept (4 KiB) for the operators only. */
const ANSWERS: Record<string, Json> = {
  '2XX': { description: 'delivered: the job is completed and never sent again (unless an operator retries or replays it)' },
  '408': { description: 'retried with back-off' },
  '425': { description: 'retried with back-off' },
  '429': { description: 'retried after `Retry-After`, or with back-off', headers: retryAfter },
  '4XX': {
    description:
      'any other 4xx (400, 401, 403, 404, 410, 422, …), and any 3xx (redirects are not followed): permanent, the job is dead at once and the admins are told',
  },
  '503': { description: 'retried after `Retry-After`, or with back-off', headers: retryAfter },
  '5XX': { description: 'any other 5xx, a timeout, a refused or reset connection, a DNS or TLS error: retried with back-off' },
};

function delivery(operationId: string, summary: string, headers: Record<string, Json>): Json {
  return {
    post: {
      operationId,
      summary,
      description:
        "One POST per attempt to the endpoint URL as configured, with the endpoint's extra `headers` too. Verify the signature over the raw bytes before parsing them (docs/receivers.md); the body is the same on every retry, the timestamp and signatures are not.",
      // The receiver's own authentication is the signature in the headers, which no security scheme of OpenAPI describes.
      security: [],
      parameters: Object.entries(headers).map(([name, h]) => ({ name, in: 'header', ...h })),
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Delivery' } } } },
      responses: ANSWERS,
    },
  };
}

/** The `webhooks` section and the schema it names. */
export function webhooksSection(): { webhooks: Json; schemas: Record<string, Json> } {
  return {
    webhooks: {
      delivery: delivery('receiveDelivery', 'A delivery to an endpoint with `scheme: acw` (the default)', ACW_HEADERS),
      standardDelivery: delivery(
        'receiveStandardDelivery',
        'A delivery to an endpoint with `scheme: standard` (Standard Webhooks)',
        STANDARD_HEADERS,
      ),
    },
    schemas: { Delivery: jsonSchema(deliveryBody, 'output') },
  };
}
