import { describe, expect, it } from 'vitest';
import { maskConfig, parseConfig } from '../../src/config/index.js';
import { parseKeyValues, tracesUrl } from '../../src/config/tracing.js';
import { carrierOf, isSampled } from '../../src/tracing/carrier.js';

// The `tracing:` block and the OTEL_* variables over it (docs/operations.md#tracing).
describe('tracing settings', () => {
  it('is off with nothing set, and on with an endpoint from the config or the environment', () => {
    expect(tracesUrl(parseConfig({}).tracing)).toBeNull();
    expect(tracesUrl(parseConfig({ tracing: { endpoint: 'http://127.0.0.1:4318/' } }).tracing)).toBe('http://127.0.0.1:4318/v1/traces');
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracesUrl(parseConfig({}, env).tracing)).toBe('http://collector:4318/v1/traces');
    // The traces endpoint is used as is, and wins over the base one.
    const both = { ...env, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:4318/custom' };
    expect(tracesUrl(parseConfig({ tracing: { endpoint: 'http://a:1' } }, both).tracing)).toBe('http://other:4318/custom');
    // OTEL_SDK_DISABLED turns it off whatever else is set.
    expect(tracesUrl(parseConfig({}, { ...env, OTEL_SDK_DISABLED: 'TRUE' }).tracing)).toBeNull();
    expect(tracesUrl(parseConfig({}, { ...env, OTEL_SDK_DISABLED: 'false' }).tracing)).not.toBeNull();
    expect(tracesUrl(parseConfig({}, { ...env, OTEL_TRACES_EXPORTER: 'none' }).tracing)).toBeNull();
    expect(tracesUrl(parseConfig({}, { ...env, OTEL_TRACES_EXPORTER: 'otlp' }).tracing)).not.toBeNull();
  });

  it('takes every standard variable over the config, key by key', () => {
    const cfg = parseConfig(
      {
        tracing: {
          endpoint: 'http://a:1',
          protocol: 'http/json',
          service_name: 'mine',
          sampler: 'always_on',
          resource_attributes: { team: 'x' },
        },
      },
      {
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_SERVICE_NAME: 'billing-hooks',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.01',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,team=a%2Cb',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k3y-value-123',
      },
    ).tracing;
    expect(cfg).toMatchObject({
      endpoint: 'http://a:1',
      protocol: 'http/protobuf',
      service_name: 'billing-hooks',
      sampler: 'parentbased_traceidratio',
      sampler_arg: 0.01,
      resource_attributes: { 'deployment.environment.name': 'prod', team: 'a,b' },
      headers: { 'x-api-key': 'k3y-value-123' },
    });
  });

  it('refuses a bad value naming the key, and masks header values and URL credentials in the logged config', () => {
    expect(() => parseConfig({}, { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:1' })).toThrow(
      /tracing\.protocol/,
    );
    expect(() => parseConfig({ tracing: { sampler_arg: 2 } })).toThrow(/tracing\.sampler_arg/);
    const masked = JSON.stringify(
      maskConfig(
        parseConfig({ tracing: { endpoint: 'https://user:pa55word-xyz@collector:4318', headers: { 'x-api-key': 'k3y-value-123' } } }),
      ),
    );
    expect(masked).not.toContain('k3y-value-123');
    expect(masked).not.toContain('pa55word-xyz');
    expect(masked).toContain('collector:4318');
  });

  it('parses key=value lists with percent-encoded values', () => {
    expect(parseKeyValues('a=1, b = x%20y ,bad,=none,c=%zz')).toEqual({ a: '1', b: 'x y', c: '%zz' });
  });

  it('keeps a valid traceparent only, and reads its sampled flag', () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(carrierOf(tp, 'congo=t61rcWkgMzE')).toEqual({ traceparent: tp, tracestate: 'congo=t61rcWkgMzE' });
    expect(carrierOf([tp], undefined)).toEqual({ traceparent: tp });
    for (const bad of [
      '',
      'junk',
      tp.toUpperCase(),
      `01${tp.slice(2)}`,
      `00-${'0'.repeat(32)}-b7ad6b7169203331-01`,
      `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01`,
    ])
      expect(carrierOf(bad, undefined)).toBeUndefined();
    expect(carrierOf(tp, 'x'.repeat(513))).toEqual({ traceparent: tp });
    expect(isSampled({ traceparent: tp })).toBe(true);
    expect(isSampled({ traceparent: `${tp.slice(0, 53)}00` })).toBe(false);
  });
});
