import { describe, expect, it } from 'vitest';
import { hotLogger } from '../src/log.js';
import { captureLogs } from './helpers/logs.js';

const SECRET = 'very-secret-value-7d1e';
const TOKEN = 'token-value-that-must-not-leak';
const SIG = 'sha256=0123456789abcdef';

describe('createLogger redaction', () => {
  it('censors secrets, tokens, passwords and signatures at the top level and one object down', () => {
    const { log, lines, raw } = captureLogs('info');
    log.info({ event: 'a', secret: SECRET, token: TOKEN, password: 'pw-1', authorization: 'Bearer x1' }, 'top level');
    log.info(
      {
        event: 'b',
        endpoint: { url: 'http://x', secret: SECRET, headers: { authorization: 'Bearer x2', 'x-acw-signature': SIG } },
        user: { name: 'ops', token: TOKEN, password: 'pw-2' },
        headers: { 'x-acw-signature': SIG, 'webhook-signature': 'v1,abc', authorization: 'Bearer x3' },
      },
      'an object logged whole by mistake',
    );
    for (const leaked of [SECRET, TOKEN, SIG, 'pw-1', 'pw-2', 'Bearer x1', 'Bearer x2', 'Bearer x3', 'v1,abc'])
      expect(raw()).not.toContain(leaked);
    expect(lines[0]).toMatchObject({ secret: '[redacted]', token: '[redacted]', password: '[redacted]', authorization: '[redacted]' });
    expect(lines[1]).toMatchObject({
      endpoint: { url: 'http://x', secret: '[redacted]', headers: { authorization: '[redacted]', 'x-acw-signature': '[redacted]' } },
      user: { name: 'ops', token: '[redacted]' },
      headers: { 'x-acw-signature': '[redacted]', 'webhook-signature': '[redacted]', authorization: '[redacted]' },
    });
  });
});

describe('createLogger redaction below one level and in error text', () => {
  it("censors sensitive keys at any depth, in arrays too, and leaves the caller's object alone", () => {
    const { log, lines, raw } = captureLogs('info');
    const config = {
      notify: { webhook: { url: 'http://x', secret: SECRET } },
      endpoints: [{ name: 'a', secret: 'arr-secret-1' }],
      users: [{ token: TOKEN }],
    };
    log.info({ event: 'config', config }, 'a whole config, three levels down');
    log.info(
      { event: 'req', request: { raw: { headers: { Authorization: 'Bearer deep-4', 'X-Acw-Signature': SIG } } } },
      'headers four levels down',
    );
    for (const leaked of [SECRET, 'arr-secret-1', TOKEN, 'deep-4', SIG]) expect(raw()).not.toContain(leaked);
    expect(lines[0]).toMatchObject({
      config: { notify: { webhook: { url: 'http://x', secret: '[redacted]' } }, endpoints: [{ name: 'a', secret: '[redacted]' }] },
    });
    expect(config.notify.webhook.secret).toBe(SECRET);
  });

  it('censors secrets quoted in error text: a URL password, a bearer token, a signature, a token parameter', () => {
    const { log, lines, raw } = captureLogs('info');
    const text = `connect failed: postgres://acw:pg-pass-9@127.0.0.1:5432/acw; sent Bearer ${TOKEN}; got ${SIG} for https://h/hook?token=qs-token-3`;
    log.error({ event: 'http.error', err: text }, 'request failed');
    const e = new TypeError(text, { cause: new Error('password=cause-pw-5') });
    log.error({ event: 'runner.error', err: e }, 'periodic runner failed');
    for (const leaked of ['pg-pass-9', TOKEN, SIG, 'qs-token-3', 'cause-pw-5']) expect(raw()).not.toContain(leaked);
    expect(lines[0]!.err).toBe(
      'connect failed: postgres://acw:[redacted]@127.0.0.1:5432/acw; sent Bearer [redacted]; got sha256=[redacted] for https://h/hook?token=[redacted]',
    );
    // Still an error as pino writes one (its type kept), and the thrown error itself is unchanged.
    expect(lines[1]!.err).toMatchObject({ type: 'TypeError', message: expect.stringContaining('acw:[redacted]@') });
    expect(e.message).toContain('pg-pass-9');
  });

  it('the hot logger is covered too (a child: same formatters)', () => {
    const { log, raw } = captureLogs('info');
    hotLogger(log).warn({ event: 'job.claim_error', err: `postgres://acw:hot-pw-2@db/acw` }, 'claim failed; retrying');
    expect(raw()).not.toContain('hot-pw-2');
  });
});

describe('hotLogger', () => {
  const fields = {
    event: 'webhook.attempt',
    job_id: 'j1',
    attempt: 2,
    status: 503,
    error_kind: 'http_status',
    next_retry_at: null,
    ok: false,
  };

  it('writes exactly the line the logger would, fields in the same order', () => {
    const { log, raw } = captureLogs('info');
    log.info(fields, 'attempt 2 failed: http_status 503');
    hotLogger(log).info(fields, 'attempt 2 failed: http_status 503');
    const [a, b] = raw()
      .trim()
      .split('\n')
      .map((l) => l.replace(/"time":"[^"]+"/, '"time":"T"'));
    expect(b).toBe(a);
    expect(JSON.parse(a ?? '{}')).toEqual({ level: 30, time: 'T', pid: process.pid, ...fields, msg: 'attempt 2 failed: http_status 503' });
  });

  it('keeps the bindings of a child logger and is made once per logger', () => {
    const { log, lines } = captureLogs('info');
    const child = log.child({ worker: 'w-1' });
    const hot = hotLogger(child);
    expect(hotLogger(child)).toBe(hot);
    expect(hotLogger(log)).not.toBe(hot);
    hot.info({ event: 'job.completed', job_id: 'j2' }, 'job completed');
    expect(lines[0]).toMatchObject({ worker: 'w-1', event: 'job.completed', job_id: 'j2' });
  });

  it("follows the logger's level, also when it changes later", () => {
    const { log, lines } = captureLogs('info');
    const hot = hotLogger(log);
    hot.debug({ event: 'job.claimed', job_id: 'j3' }, 'job claimed');
    expect(lines).toHaveLength(0);
    expect(hot.isLevelEnabled('debug')).toBe(false);
    log.level = 'debug';
    hot.debug({ event: 'job.claimed', job_id: 'j3' }, 'job claimed');
    expect(lines.map((l) => l.event)).toEqual(['job.claimed']);
    log.level = 'warn';
    hot.info({ event: 'webhook.attempt', job_id: 'j3' }, 'delivered: 200');
    expect(lines).toHaveLength(1);
  });

  it('still censors a sensitive key that gets past the type (the exact redact paths stay)', () => {
    const { log, lines, raw } = captureLogs('info');
    const hot = hotLogger(log);
    // @ts-expect-error: SafeFields forbids the sensitive names; this checks the runtime net under that.
    hot.info({ event: 'x', secret: SECRET, token: TOKEN }, 'mistake');
    // @ts-expect-error: and any object value.
    hot.info({ event: 'y', config: { webhook: 1 } }, 'objects are not hot fields');
    expect(raw()).not.toContain(SECRET);
    expect(raw()).not.toContain(TOKEN);
    expect(lines[0]).toMatchObject({ secret: '[redacted]', token: '[redacted]' });
  });
});
