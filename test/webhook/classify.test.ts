import { errors } from 'undici';
import { describe, expect, it } from 'vitest';
import { classifyError, classifyResponse } from '../../src/webhook/classify.js';

function coded(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

describe('classifyResponse', () => {
  it.each([200, 201, 202, 204, 299])('treats %i as delivered', (status) => {
    expect(classifyResponse(status, {})).toEqual({ kind: 'delivered', status });
  });

  it.each([301, 302, 303, 307, 308])('treats %i as a permanent redirect that is not followed', (status) => {
    const out = classifyResponse(status, { location: 'https://elsewhere.example/hook' });
    expect(out).toMatchObject({ kind: 'permanent', status, errorKind: 'redirect' });
    expect(out.kind !== 'delivered' && out.message).toMatch(new RegExp(`${status}.*redirects are not followed.*elsewhere`));
  });

  it.each([400, 401, 403, 404, 405, 409, 410, 413, 415, 422, 451, 499])('treats %i as permanent', (status) => {
    expect(classifyResponse(status, {})).toEqual({ kind: 'permanent', status, errorKind: 'http_status', message: `HTTP ${status}` });
  });

  it.each([408, 425, 429, 500, 502, 503, 504, 599])('retries %i', (status) => {
    expect(classifyResponse(status, {})).toEqual({ kind: 'retry', status, errorKind: 'http_status', message: `HTTP ${status}` });
  });

  it('honours Retry-After seconds and HTTP dates on 429 and 503', () => {
    const now = Date.UTC(2024, 0, 1);
    expect(classifyResponse(429, { 'retry-after': '30' }, now)).toMatchObject({ kind: 'retry', retryAfterMs: 30_000 });
    expect(classifyResponse(503, { 'Retry-After': 'Mon, 01 Jan 2024 00:02:00 GMT' }, now)).toMatchObject({ retryAfterMs: 120_000 });
  });

  it('ignores Retry-After on other statuses and when unparseable', () => {
    expect(classifyResponse(500, { 'retry-after': '30' })).not.toHaveProperty('retryAfterMs');
    expect(classifyResponse(408, { 'retry-after': '30' })).not.toHaveProperty('retryAfterMs');
    expect(classifyResponse(429, { 'retry-after': 'later' })).not.toHaveProperty('retryAfterMs');
  });
});

describe('classifyError', () => {
  it.each([
    ['undici ConnectTimeoutError', new errors.ConnectTimeoutError(), 'timeout'],
    ['undici HeadersTimeoutError', new errors.HeadersTimeoutError(), 'timeout'],
    ['undici BodyTimeoutError', new errors.BodyTimeoutError(), 'timeout'],
    ['a TimeoutError DOMException', new DOMException('timed out', 'TimeoutError'), 'timeout'],
    ['ENOTFOUND', coded('ENOTFOUND', 'getaddrinfo ENOTFOUND hooks.invalid'), 'dns'],
    ['EAI_AGAIN', coded('EAI_AGAIN'), 'dns'],
    ['ECONNREFUSED', coded('ECONNREFUSED'), 'connect'],
    ['ECONNRESET', coded('ECONNRESET'), 'connect'],
    ['EPIPE', coded('EPIPE'), 'connect'],
    ['undici SocketError', new errors.SocketError('other side closed'), 'connect'],
    ['happy-eyeballs AggregateError', Object.assign(new AggregateError([coded('ECONNREFUSED')], ''), { code: 'ECONNREFUSED' }), 'connect'],
    ['a TLS certificate error', coded('CERT_HAS_EXPIRED'), 'tls'],
    ['an unknown error', new Error('boom'), 'network'],
    ['a thrown string', 'boom', 'network'],
    ['undici RequestAbortedError', new errors.RequestAbortedError(), 'aborted'],
    ['an AbortError DOMException', new DOMException('aborted', 'AbortError'), 'aborted'],
  ])('retries %s as %s', (_name, err, errorKind) => {
    expect(classifyError(err)).toMatchObject({ kind: 'retry', errorKind });
  });

  it('treats a request undici refuses to build as permanent invalid_request', () => {
    expect(classifyError(new errors.InvalidArgumentError('invalid x-foo header'))).toMatchObject({
      kind: 'permanent',
      errorKind: 'invalid_request',
    });
  });

  it('describes a happy-eyeballs AggregateError by its first inner error', () => {
    const err = Object.assign(new AggregateError([coded('ECONNREFUSED', 'connect ECONNREFUSED ::1:1')], ''), { code: 'ECONNREFUSED' });
    expect(classifyError(err)).toMatchObject({ message: 'connect ECONNREFUSED ::1:1' });
  });

  it('keeps messages short and names the code', () => {
    const out = classifyError(coded('ECONNRESET', 'x'.repeat(5000)));
    expect(out.kind !== 'delivered' && out.message.length).toBeLessThanOrEqual(500);
    expect(out.kind !== 'delivered' && out.message).toMatch(/^ECONNRESET: /);
  });
});
