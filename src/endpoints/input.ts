import { z } from 'zod';
import { isPrintable } from '../admin/params.js';
import { ORDERINGS, SCHEMES } from '../config/schema.js';
import { duration, headers, int, pattern, rateLimit, topics } from '../config/fields.js';

/**
 * What the endpoints API and CLI accept (docs/operations.md#endpoints-at-run-time): the config's
 * own field rules (name grammar, topics, headers, rate limits), a URL checked more strictly than
 * the config's (no user-info, bounded length), and a timeout from 100 ms to 60 s. Unknown fields are
 * refused, naming them.
 */

export const NAME = pattern(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'an endpoint name like "billing-hooks" (lowercase, digits, "_-")');
export const MAX_URL = 2048;
const TIMEOUT_MIN = 100;
const TIMEOUT_MAX = 60_000;

const url = z
  .string({ error: 'expected a URL string' })
  .max(MAX_URL, { error: `must be at most ${MAX_URL} characters` })
  .superRefine((s, ctx) => {
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'expected an http(s) URL like "https://hooks.example.com/acw"' });
      return;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `expected an http or https URL, got scheme "${u.protocol.slice(0, -1).slice(0, 20)}"` });
    } else if (u.username !== '' || u.password !== '') {
      ctx.addIssue({ code: 'custom', message: 'must not carry user-info (user:password@): put credentials in headers' });
    }
  });

const timeout = duration({ positive: true }).pipe(
  z.number().min(TIMEOUT_MIN, { error: `must be from 100ms to 60s` }).max(TIMEOUT_MAX, { error: `must be from 100ms to 60s` }),
);

const description = z
  .string({ error: 'expected a string' })
  .max(500, { error: 'must be at most 500 characters' })
  .refine((s) => s === '' || isPrintable(s), { error: 'expected printable characters' });

/** A rate limit as given ("20/s", "600/min"), kept as text for display; null clears it. */
const rate = z.unknown().transform((v, ctx): string | null => {
  if (v === null) return null;
  const r = rateLimit().safeParse(v);
  if (!r.success || typeof v !== 'string') {
    ctx.addIssue({ code: 'custom', message: r.error?.issues[0]?.message ?? 'expected a rate like "20/s" or "600/min"' });
    return z.NEVER;
  }
  return v.trim();
});

const fields = {
  url,
  topics: topics().pipe(z.array(z.string()).max(100, { error: 'at most 100 topics' })),
  scheme: z.enum(SCHEMES, { error: `expected one of ${SCHEMES.map((s) => JSON.stringify(s)).join(', ')}` }),
  ordering: z.enum(ORDERINGS, { error: `expected one of ${ORDERINGS.map((s) => JSON.stringify(s)).join(', ')}` }),
  headers: headers(),
  timeout,
  max_in_flight: int(1, 10_000),
  rate_limit: rate,
  enabled: z.boolean({ error: 'expected true or false' }),
  /** null: notify.webhook.propagate_trace decides (on update: back to it). */
  propagate_trace: z.boolean({ error: 'expected true, false or null' }).nullable(),
  description,
};

export const createEndpointInput = z.strictObject({
  name: NAME,
  url: fields.url,
  topics: fields.topics,
  scheme: fields.scheme.optional(),
  ordering: fields.ordering.optional(),
  headers: fields.headers.optional(),
  timeout: fields.timeout.optional(),
  max_in_flight: fields.max_in_flight.optional(),
  rate_limit: fields.rate_limit.optional(),
  enabled: fields.enabled.optional(),
  propagate_trace: fields.propagate_trace.optional(),
  description: fields.description.optional(),
  /** Given: used as is (scheme standard needs "whsec_<base64>"); absent: generated, returned once. */
  secret: z
    .string({ error: 'expected a string' })
    .min(16, { error: 'must be at least 16 characters' })
    .max(512, { error: 'must be at most 512 characters' })
    .optional(),
});

export const updateEndpointInput = z
  .strictObject({
    url: fields.url.optional(),
    topics: fields.topics.optional(),
    scheme: fields.scheme.optional(),
    ordering: fields.ordering.optional(),
    headers: fields.headers.optional(),
    timeout: fields.timeout.optional(),
    max_in_flight: fields.max_in_flight.optional(),
    rate_limit: fields.rate_limit.optional(),
    enabled: fields.enabled.optional(),
    propagate_trace: fields.propagate_trace.optional(),
    description: fields.description.optional(),
  })
  .refine((o) => Object.keys(o).length > 0, { error: 'expected at least one field to change' });

export type CreateEndpointInput = z.output<typeof createEndpointInput>;
export type UpdateEndpointInput = z.output<typeof updateEndpointInput>;
