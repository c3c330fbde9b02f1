import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../src/config/index.js';
import type { AttemptRecord, JobOutcome } from '../../src/queue/types.js';
import { AdaptiveLimits } from '../../src/endpoint-state/adaptive-limits.js';
import { congestionSignal } from '../../src/endpoint-state/signals.js';

const ep = (over: Partial<Endpoint> = {}): Endpoint => ({
  name: 'hooks',
  url: 'http://127.0.0.1:1/',
  secret: 's',
  topics: ['*'],
  timeout: 1_000,
  connect_timeout: 1_000,
  max_in_flight: 16,
  rate_limit: 0,
  scheme: 'acw',
  headers: {},
  enabled: true,
  ssrf_guard: false,
  allow_networks: [],
  ...over,
});
const attempt = (over: Partial<AttemptRecord> = {}): AttemptRecord => ({
  attempt: 1,
  endpoint: 'hooks',
  statusCode: null,
  errorKind: null,
  error: null,
  durationMs: 1,
  responseBody: null,
  ...over,
});
const ok: JobOutcome = { kind: 'complete', attempt: attempt({ statusCode: 200 }) };
const timeout: JobOutcome = { kind: 'retry', error: 'timeout', attempt: attempt({ errorKind: 'timeout' }) };

describe('congestionSignal', () => {
  it('counts timeouts, refused connections, 5xx and 429 as failures; 4xx, redirects and aborts as neither', () => {
    expect(congestionSignal(timeout)).toBe('failure');
    expect(congestionSignal({ kind: 'retry', error: 'x', attempt: attempt({ errorKind: 'connect' }) })).toBe('failure');
    expect(congestionSignal({ kind: 'retry', error: 'x', attempt: attempt({ errorKind: 'http_status', statusCode: 503 }) })).toBe(
      'failure',
    );
    expect(congestionSignal({ kind: 'retry', error: 'x', attempt: attempt({ errorKind: 'http_status', statusCode: 429 }) })).toBe(
      'failure',
    );
    expect(congestionSignal({ kind: 'permanent', error: 'x', attempt: attempt({ errorKind: 'http_status', statusCode: 404 }) })).toBeNull();
    expect(congestionSignal({ kind: 'permanent', error: 'x', attempt: attempt({ errorKind: 'redirect', statusCode: 302 }) })).toBeNull();
    expect(congestionSignal({ kind: 'retry', error: 'x', attempt: attempt({ errorKind: 'aborted', aborted: true }) })).toBeNull();
    expect(congestionSignal(ok)).toBe('success');
  });
});

describe('AdaptiveLimits', () => {
  it('halves at most once per timeout window, never below 1, and climbs back by one per success up to max_in_flight', () => {
    let now = 0;
    const eps = new Map([['hooks', ep()]]);
    const l = new AdaptiveLimits({ endpoints: () => eps, now: () => now });
    expect(l.limit('hooks')).toBe(16);
    l.observe('hooks', timeout);
    l.observe('hooks', timeout); // same window: the in-flight attempts that timed out together count once
    expect(l.limit('hooks')).toBe(8);
    expect(l.isDegraded('hooks')).toBe(true);
    for (let i = 0; i < 10; i++) {
      now += 1_000;
      l.observe('hooks', timeout);
    }
    expect(l.limit('hooks')).toBe(1);
    l.observe('hooks', { kind: 'permanent', error: 'x', attempt: attempt({ errorKind: 'http_status', statusCode: 400 }) });
    expect(l.limit('hooks')).toBe(1);
    for (let i = 0; i < 14; i++) l.observe('hooks', ok);
    expect(l.limit('hooks')).toBe(15);
    l.observe('hooks', ok);
    expect(l.limit('hooks')).toBe(16);
    expect(l.isDegraded('hooks')).toBe(false);
  });

  it('a lowered limit comes back by time too, once the endpoint has not failed for a while (an idle one has no successes)', () => {
    let now = 0;
    const eps = new Map([['hooks', ep()]]);
    const l = new AdaptiveLimits({ endpoints: () => eps, now: () => now });
    l.observe('hooks', timeout);
    expect(l.isDegraded('hooks')).toBe(true);
    now += 29_000;
    expect(l.limit('hooks')).toBe(8);
    now += 1_000;
    expect(l.isDegraded('hooks')).toBe(false);
    expect(l.limit('hooks')).toBe(16);
  });

  it('an endpoint with max_in_flight 1 has nothing to lower and stays undegraded', () => {
    const eps = new Map([['hooks', ep({ max_in_flight: 1 })]]);
    const l = new AdaptiveLimits({ endpoints: () => eps, now: () => 0 });
    l.observe('hooks', timeout);
    expect(l.isDegraded('hooks')).toBe(false);
    expect(l.limit('hooks')).toBe(1);
  });
});
