/**
 * The topic catalog for receivers (docs/receivers.md#topics): an AsyncAPI 3.0 document of every
 * topic (GET /asyncapi.json), and each topic's delivery in the OpenAPI document's `webhooks`. Both
 * put each schema version under its own name in `components.schemas` (`order.created.v2`), its
 * local `$ref`s (`#/$defs/line`) rewritten to point inside it there.
 */
import { VERSION } from '../version.js';
import { latest, type Topic, type TopicVersion } from './rows.js';

type Json = Record<string, unknown>;

/** The name of one version's data schema in `components.schemas`. */
export const schemaName = (topic: string, version: number): string => `${topic}.v${version}`;

/** A copy of `schema` whose local references point under `base` (`#/components/schemas/NAME`). */
function rebase(schema: unknown, base: string): unknown {
  if (Array.isArray(schema)) return schema.map((s) => rebase(s, base));
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === '$schema' || k === '$id') continue;
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${base}${v.slice(1)}` : rebase(v, base);
  }
  return out;
}

/** Every version of every live topic as named schemas. */
export function topicSchemas(topics: readonly Topic[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const t of topics)
    for (const v of t.versions)
      out[schemaName(t.name, v.version)] = rebase(v.schema, `#/components/schemas/${schemaName(t.name, v.version)}`);
  return out;
}

const live = (topics: readonly Topic[]): Array<{ t: Topic; v: TopicVersion }> =>
  topics.flatMap((t) => {
    const v = latest(t);
    return !t.archived && v ? [{ t, v }] : [];
  });

const describeTopic = (t: Topic): string =>
  [t.description, t.deprecated ? `Deprecated${t.deprecation_note ? `: ${t.deprecation_note}` : ''}.` : ''].filter(Boolean).join(' ');

/** A delivery's body with this version's data. */
function body(t: Topic, v: TopicVersion): Json {
  return {
    type: 'object',
    required: ['event_id', 'topic', 'occurred_at', 'data'],
    properties: {
      event_id: { type: 'string', format: 'uuid', description: "the event's UUID" },
      topic: { type: 'string', const: t.name },
      occurred_at: { type: 'string', format: 'date-time', description: 'when it was notified, RFC 3339 in UTC with milliseconds' },
      data: { $ref: `#/components/schemas/${schemaName(t.name, v.version)}` },
    },
  };
}

const exampleBody = (t: Topic, data: unknown): Json => ({
  event_id: '0190b7a0-0000-7000-8000-000000000000',
  topic: t.name,
  occurred_at: '2026-01-01T00:00:00.000Z',
  data,
});

const HEADER_DOCS: Record<string, string> = {
  'X-ACW-Topic': 'the topic',
  'X-ACW-Schema-Version': 'the version of the schema the data was validated against',
  'X-ACW-Event-Id': 'the UUID of this delivery (one per event and endpoint), the same on every retry: deduplicate on it',
  'X-ACW-Timestamp': 'Unix seconds when this attempt was signed',
  'X-ACW-Signature': '`sha256=` and the hex HMAC-SHA256 of `<X-ACW-Timestamp>.<body>` with the endpoint secret',
  'X-ACW-Signature-Next': 'only during a secret rotation: the same HMAC with the new secret',
};

function headers(t: Topic, v: TopicVersion): Json {
  const properties: Json = {};
  for (const [name, description] of Object.entries(HEADER_DOCS)) properties[name] = { type: 'string', description };
  properties['X-ACW-Topic'] = { type: 'string', const: t.name, description: HEADER_DOCS['X-ACW-Topic'] };
  properties['X-ACW-Schema-Version'] = { type: 'string', const: String(v.version), description: HEADER_DOCS['X-ACW-Schema-Version'] };
  return {
    type: 'object',
    required: ['X-ACW-Topic', 'X-ACW-Schema-Version', 'X-ACW-Event-Id', 'X-ACW-Timestamp', 'X-ACW-Signature'],
    properties,
  };
}

const SIGNATURE =
  'Every delivery is an HTTP POST of the JSON body, signed: `X-ACW-Signature` is `sha256=` and the lower-case hex ' +
  'HMAC-SHA256 of `<X-ACW-Timestamp>.<raw body>` with the endpoint secret (endpoints with `scheme: standard` get the ' +
  'Standard Webhooks headers `webhook-id`, `webhook-timestamp`, `webhook-signature` instead). Verify it over the raw ' +
  'bytes before parsing (docs/receivers.md); answer 2xx once handled.';

/** The AsyncAPI 3.0 document of every topic of the catalog (archived ones left out). */
export function asyncApiDocument(topics: readonly Topic[]): Json {
  const channels: Json = {};
  const operations: Json = {};
  const messages: Json = {};
  for (const { t, v } of live(topics)) {
    const id = schemaName(t.name, v.version);
    messages[id] = {
      name: t.name,
      title: `${t.name} (schema version ${v.version})`,
      ...(describeTopic(t) ? { summary: describeTopic(t) } : {}),
      contentType: 'application/json',
      headers: headers(t, v),
      payload: body(t, v),
      examples: v.examples.slice(0, 5).map((data, i) => ({
        name: `example${i + 1}`,
        headers: { 'X-ACW-Topic': t.name, 'X-ACW-Schema-Version': String(v.version) },
        payload: exampleBody(t, data),
      })),
    };
    channels[t.name] = {
      address: t.name,
      title: t.name,
      ...(describeTopic(t) ? { description: describeTopic(t) } : {}),
      messages: { [id]: { $ref: `#/components/messages/${id}` } },
    };
    operations[`deliver.${t.name}`] = {
      action: 'send',
      title: `Deliver ${t.name}`,
      summary: 'POSTed to every endpoint whose whitelist matches the topic',
      channel: { $ref: `#/channels/${t.name}` },
      messages: [{ $ref: `#/channels/${t.name}/messages/${id}` }],
      security: [{ $ref: '#/components/securitySchemes/acwSignature' }],
    };
  }
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'acw-webhooks deliveries',
      version: VERSION,
      description: `The events this service delivers, one channel per topic of its catalog. ${SIGNATURE}`,
    },
    defaultContentType: 'application/json',
    channels,
    operations,
    components: {
      schemas: topicSchemas(live(topics).map(({ t }) => t)),
      messages,
      securitySchemes: {
        acwSignature: { type: 'httpApiKey', name: 'X-ACW-Signature', in: 'header', description: SIGNATURE },
      },
    },
  };
}

/** Each live topic's delivery as an OpenAPI `webhooks` entry (`topic.NAME`), with its schemas. */
export function topicWebhooks(topics: readonly Topic[]): { webhooks: Json; schemas: Record<string, unknown> } {
  const webhooks: Json = {};
  for (const { t, v } of live(topics)) {
    const description = describeTopic(t);
    webhooks[`topic.${t.name}`] = {
      post: {
        operationId: `receive.${t.name}`,
        summary: `A delivery of ${t.name} (schema version ${v.version})`,
        ...(description ? { description } : {}),
        security: [],
        parameters: Object.entries(headers(t, v)['properties'] as Json).map(([name, schema]) => ({
          name,
          in: 'header',
          required: name !== 'X-ACW-Signature-Next',
          schema,
        })),
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: body(t, v),
              examples: Object.fromEntries(v.examples.slice(0, 5).map((data, i) => [`example${i + 1}`, { value: exampleBody(t, data) }])),
            },
          },
        },
        responses: { '2XX': { description: 'delivered' }, default: { description: 'retried or dead: docs/receivers.md' } },
      },
    };
  }
  return { webhooks, schemas: topicSchemas(live(topics).map(({ t }) => t)) };
}
