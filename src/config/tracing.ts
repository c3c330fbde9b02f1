/**
 * The `tracing:` block (docs/operations.md#tracing) and the standard OTEL_* variables that override
 * it key by key, as DATABASE_URL overrides `database.url`. Only names and strings here: nothing of
 * OpenTelemetry is loaded unless tracing is on (src/tracing/).
 */
import { z } from 'zod';
import { show } from './errors.js';
import { bool, fraction, headers, httpUrl, oneOf, strict, text } from './fields.js';
import { isObject } from './rules.js';

export const TRACE_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export const TRACE_SAMPLERS = [
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
  'always_on',
  'always_off',
  'traceidratio',
] as const;

const RESOURCE_KEY = /^[A-Za-z0-9_.-]{1,128}$/;

export const tracingSchema = strict({
  disabled: bool().default(false).describe('true: no tracing whatever else is set; OTEL_SDK_DISABLED overrides'),
  endpoint: httpUrl({ optional: true })
    .default('')
    .describe(
      'OTLP/HTTP base URL, /v1/traces appended; empty with traces_endpoint empty: tracing off; OTEL_EXPORTER_OTLP_ENDPOINT overrides',
    ),
  traces_endpoint: httpUrl({ optional: true })
    .default('')
    .describe('OTLP/HTTP traces URL, used as is (wins over endpoint); OTEL_EXPORTER_OTLP_TRACES_ENDPOINT overrides'),
  protocol: oneOf(TRACE_PROTOCOLS).default('http/protobuf').describe('OTLP encoding; OTEL_EXPORTER_OTLP_PROTOCOL overrides'),
  headers: headers()
    .default(() => ({}))
    .describe('headers of each export (an API key); OTEL_EXPORTER_OTLP_HEADERS overrides'),
  service_name: text()
    .min(1, { error: 'must not be empty' })
    .default('acw-webhooks')
    .describe('the resource attribute service.name; OTEL_SERVICE_NAME overrides'),
  sampler: oneOf(TRACE_SAMPLERS)
    .default('parentbased_always_on')
    .describe('which traces are kept (an attempt follows its producer instead); OTEL_TRACES_SAMPLER overrides'),
  sampler_arg: fraction().default(1).describe('the ratio of the traceidratio samplers; OTEL_TRACES_SAMPLER_ARG overrides'),
  resource_attributes: z
    .record(
      text().regex(RESOURCE_KEY, { error: (iss) => `expected an attribute name, got ${show(iss.input)}` }),
      z.preprocess((v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v), text()),
    )
    .default(() => ({}))
    .describe('more resource attributes (deployment.environment.name: prod); OTEL_RESOURCE_ATTRIBUTES overrides'),
});

type Env = Readonly<Record<string, string | undefined>>;

/** `k=v,k2=v2` with percent-encoded values (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS). */
export function parseKeyValues(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {
      // kept as written
    }
    if (key !== '') out[key] = value;
  }
  return out;
}

/** The OTEL_* variables set (non-empty), written over the `tracing:` block of the tree. */
export function withTracingEnv(tree: unknown, env: Env): unknown {
  const set = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v ? v : undefined;
  };
  const over: Record<string, unknown> = {};
  const disabled = set('OTEL_SDK_DISABLED');
  if (disabled !== undefined) over['disabled'] = disabled.toLowerCase() === 'true';
  // OTEL_TRACES_EXPORTER=none: no exporter, so no tracing (otlp, the default, is the only other kind here).
  if (set('OTEL_TRACES_EXPORTER')?.toLowerCase() === 'none') over['disabled'] = true;
  const endpoint = set('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (endpoint !== undefined) over['endpoint'] = endpoint;
  const traces = set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (traces !== undefined) over['traces_endpoint'] = traces;
  const protocol = set('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol !== undefined) over['protocol'] = protocol;
  const hdrs = set('OTEL_EXPORTER_OTLP_TRACES_HEADERS') ?? set('OTEL_EXPORTER_OTLP_HEADERS');
  if (hdrs !== undefined) over['headers'] = parseKeyValues(hdrs);
  const service = set('OTEL_SERVICE_NAME');
  if (service !== undefined) over['service_name'] = service;
  const sampler = set('OTEL_TRACES_SAMPLER');
  if (sampler !== undefined) over['sampler'] = sampler;
  const arg = set('OTEL_TRACES_SAMPLER_ARG');
  if (arg !== undefined) over['sampler_arg'] = arg;
  const attrs = set('OTEL_RESOURCE_ATTRIBUTES');
  if (attrs !== undefined) over['resource_attributes'] = parseKeyValues(attrs);
  if (Object.keys(over).length === 0) return tree;
  const root = tree ?? {};
  if (!isObject(root)) return tree; // not a mapping: the schema reports it
  const block = root['tracing'] ?? {};
  if (!isObject(block)) return tree;
  return { ...root, tracing: { ...block, ...over } };
}

/** Where spans go, or null: tracing is off (no exporter set, or disabled). */
export function tracesUrl(t: { disabled: boolean; endpoint: string; traces_endpoint: string }): string | null {
  if (t.disabled) return null;
  if (t.traces_endpoint !== '') return t.traces_endpoint;
  if (t.endpoint !== '') return `${t.endpoint.replace(/\/+$/, '')}/v1/traces`;
  return null;
}
