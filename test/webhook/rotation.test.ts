// Secret rotation (docs/operations.md#rotating-a-secret): which secrets sign an attempt, the headers
// they give, verification with several secrets, the config keys, and real deliveries through the
// overlap and after it, checked by the receivers we promise to satisfy.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, configWarnings, maskConfig, parseConfig, resolveEndpoints } from '../../src/config/index.js';
import { notifyNow } from '../../src/notify/notify.js';
import type { Service } from '../../src/service.js';
import { verifyWebhook, verifyWebhookDetailed } from '../../src/verify.js';
import { buildHeaders, signAcw, signingSecrets } from '../../src/webhook/sign.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { rawHeaderObject, startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { merge, startTestService } from '../helpers/service.js';

const SEED_003 = fileURLToPath(new URL('../helpers/seed003_verify.py', import.meta.url));
const OLD = 'old-secret-4f1c-aaaa';
const NEW = 'new-secret-9b2e-bbbb';
const OLD_WH = `whsec_${Buffer.from('old-standard-key-0123456789abcd').toString('base64')}`;
const NEW_WH = `whsec_${Buffer.from('new-standard-key-0123456789abcd').toString('base64')}`;
const JOB = '3f1e1c2a-8a9b-4c7d-9e0f-112233445566';
const BODY = '{"event_id":"e1","topic":"t.x","occurred_at":"2024-01-01T00:00:00.000Z","data":{"n":"Zoë"}}';
const NOW = 1_700_000_000_000;
const TS = NOW / 1000;

function seed003Verify(secret: string, req: ReceivedRequest): boolean {
  const input = JSON.stringify({ secret, headers: rawHeaderObject(req.rawHeaders), body_b64: req.body.toString('base64') });
  return execFileSync('python3', [SEED_003], { input, encoding: 'utf8', timeout: 10_000 }).trim() === 'True';
}

/** Node's headers as plain strings, as the standardwebhooks library wants them. */
const flat = (req: ReceivedRequest) => Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));

describe('signingSecrets', () => {
  const ep = { secret: OLD, secret_next: NEW, rotate_until: NOW };
  it('is the old secret with the new one before rotate_until, the new one alone from it on', () => {
    expect(signingSecrets(ep, NOW - 1)).toEqual({ secret: OLD, next: NEW });
    expect(signingSecrets(ep, NOW)).toEqual({ secret: NEW });
    expect(signingSecrets(ep, NOW + 86_400_000)).toEqual({ secret: NEW });
  });
  it('is the one secret when no rotation is set (or only half of one)', () => {
    expect(signingSecrets({ secret: OLD }, NOW)).toEqual({ secret: OLD });
    expect(signingSecrets({ secret: OLD, secret_next: NEW }, NOW)).toEqual({ secret: OLD });
    expect(signingSecrets({ secret: OLD, secret_next: '', rotate_until: NOW + 1 }, NOW)).toEqual({ secret: OLD });
  });
});

describe('headers during an overlap', () => {
  it('acw: X-ACW-Signature on the old secret, X-ACW-Signature-Next on the new one, same timestamp', () => {
    const h = buildHeaders({ scheme: 'acw', secret: OLD, secretNext: NEW, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
    expect(h['X-ACW-Signature']).toBe(signAcw(OLD, TS, BODY));
    expect(h['X-ACW-Signature-Next']).toBe(signAcw(NEW, TS, BODY));
    const one = buildHeaders({ scheme: 'acw', secret: OLD, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
    expect(Object.keys(one)).not.toContain('X-ACW-Signature-Next');
  });
  it('standard: both signatures in webhook-signature, space-separated, old first', () => {
    const h = buildHeaders({ scheme: 'standard', secret: OLD_WH, secretNext: NEW_WH, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
    const one = (s: string) => buildHeaders({ scheme: 'standard', secret: s, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
    expect(h['webhook-signature']).toBe(`${one(OLD_WH)['webhook-signature']} ${one(NEW_WH)['webhook-signature']}`);
  });
  it('an endpoint header cannot set X-ACW-Signature-Next', () => {
    const h = buildHeaders({
      scheme: 'acw',
      secret: OLD,
      jobId: JOB,
      topic: 't.x',
      body: BODY,
      timestamp: TS,
      extra: { 'x-acw-signature-next': 'x' },
    });
    expect(Object.keys(h).map((k) => k.toLowerCase())).not.toContain('x-acw-signature-next');
  });
});

describe('verifyWebhook with several secrets', () => {
  const overlap = buildHeaders({ scheme: 'acw', secret: OLD, secretNext: NEW, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
  const after = buildHeaders({ scheme: 'acw', secret: NEW, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
  const v = (secret: string | string[], headers: Record<string, string>, body = BODY) =>
    verifyWebhookDetailed({ secret, headers, body, now: NOW });

  it('accepts an overlap delivery with the old secret, the new one, or both (X-ACW-Signature-Next checked too)', () => {
    expect(v(OLD, overlap)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(v(NEW, overlap)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(v([OLD, NEW], overlap)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(v([NEW, OLD], overlap)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(v(['other', NEW], overlap)).toMatchObject({ ok: true, secretIndex: 1 });
  });
  it('after the overlap, accepts with the new secret (alone or listed), not with the old one alone', () => {
    expect(v([OLD, NEW], after)).toMatchObject({ ok: true, secretIndex: 1 });
    expect(v(NEW, after)).toMatchObject({ ok: true });
    expect(v(OLD, after)).toEqual({ ok: false, reason: 'signature_mismatch' });
  });
  it('rejects a tampered body whatever the secrets, and malformed or bad input', () => {
    expect(v([OLD, NEW], overlap, `${BODY} `)).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(v([OLD, NEW], { ...overlap, 'X-ACW-Signature-Next': 'nope' })).toEqual({ ok: false, reason: 'malformed_header' });
    expect(v([], overlap)).toEqual({ ok: false, reason: 'bad_secret' });
    expect(v([OLD, ''], overlap)).toEqual({ ok: false, reason: 'bad_secret' });
    // A signature that matches neither header is not rescued by a second secret.
    expect(v(['a', 'b'], overlap)).toEqual({ ok: false, reason: 'signature_mismatch' });
  });
  it('standard: either secret, or a list, verifies a delivery carrying both signatures', () => {
    const h = buildHeaders({ scheme: 'standard', secret: OLD_WH, secretNext: NEW_WH, jobId: JOB, topic: 't.x', body: BODY, timestamp: TS });
    expect(v(OLD_WH, h)).toMatchObject({ ok: true });
    expect(v(NEW_WH, h)).toMatchObject({ ok: true });
    expect(v([`whsec_${Buffer.from('x').toString('base64')}`, NEW_WH], h)).toMatchObject({ ok: true, secretIndex: 1 });
    expect(v([OLD_WH, 'not-whsec'], h)).toEqual({ ok: false, reason: 'bad_secret' });
  });
  it('never puts a secret or a signature in its answer', () => {
    const text = JSON.stringify([v([OLD, NEW], overlap), v(['a', 'b'], overlap)]);
    for (const needle of [OLD, NEW, overlap['X-ACW-Signature']!.slice(7), overlap['X-ACW-Signature-Next']!.slice(7)]) {
      expect(text).not.toContain(needle);
    }
  });
});

const withCrm = (ep: Record<string, unknown>) => ({
  notify: { webhook: { endpoints: [{ name: 'crm', url: 'http://127.0.0.1:9/crm', secret: OLD, topics: ['*'], ...ep }] } },
});
const problems = (raw: unknown): string[] => {
  try {
    parseConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  return [];
};

describe('config keys secret_next and rotate_until', () => {
  it('resolve to the endpoint fields (rotate_until in epoch ms), masked in the logged config', () => {
    const config = parseConfig(withCrm({ secret_next: NEW, rotate_until: '2026-12-02T06:00:00Z' }));
    expect(resolveEndpoints(config)[0]).toMatchObject({ secret: OLD, secret_next: NEW, rotate_until: Date.parse('2026-12-02T06:00:00Z') });
    const masked = JSON.stringify(maskConfig(config));
    expect(masked).not.toContain(NEW);
    expect(masked).toContain('"secret_next":"[redacted]"');
    const top = parseConfig({
      notify: { webhook: { url: 'http://127.0.0.1:9/d', secret: OLD, secret_next: NEW, rotate_until: '2026-12-02T07:00:00+01:00' } },
    });
    expect(resolveEndpoints(top)[0]).toMatchObject({ name: 'default', secret_next: NEW, rotate_until: Date.parse('2026-12-02T06:00:00Z') });
    expect(resolveEndpoints(parseConfig(withCrm({})))[0]).not.toHaveProperty('secret_next');
  });

  it('config check warns once the overlap is over, naming the key', () => {
    const config = parseConfig(withCrm({ secret_next: NEW, rotate_until: '2026-12-02T06:00:00Z' }));
    expect(configWarnings(config, Date.parse('2026-12-02T05:59:59Z'))).toEqual([]);
    const warnings = configWarnings(config, Date.parse('2026-12-02T06:00:00Z'));
    expect(warnings).toEqual([
      expect.stringMatching(/^notify\.webhook\.endpoints\[0\]\.rotate_until: has passed: only secret_next signs now/),
    ]);
    expect(warnings.join('')).not.toContain(NEW);
  });

  it('are refused naming the key, never echoing a secret', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ secret_next: NEW, rotate_until: 'tomorrow' }, 'notify.webhook.endpoints[0].rotate_until: expected an RFC 3339 time'],
      [{ secret_next: NEW, rotate_until: '2026-12-02' }, 'notify.webhook.endpoints[0].rotate_until: expected an RFC 3339 time'],
      [{ secret_next: NEW }, 'notify.webhook.endpoints[0].rotate_until: required with secret_next'],
      [{ rotate_until: '2026-12-02T06:00:00Z' }, 'notify.webhook.endpoints[0].secret_next: required with rotate_until'],
      [{ secret_next: OLD, rotate_until: '2026-12-02T06:00:00Z' }, 'notify.webhook.endpoints[0].secret_next: is the same as secret'],
      [{ secret_next: '', rotate_until: '2026-12-02T06:00:00Z' }, 'notify.webhook.endpoints[0].secret_next: must not be empty'],
      [
        { scheme: 'standard', secret: OLD_WH, secret_next: NEW, rotate_until: '2026-12-02T06:00:00Z' },
        'notify.webhook.endpoints[0].secret_next: scheme "standard" needs a secret like "whsec_<base64>"',
      ],
    ];
    for (const [ep, expected] of cases) {
      const issues = problems(withCrm(ep));
      expect(issues.join('\n')).toContain(expected);
      expect(issues.join('\n')).not.toContain(NEW);
      expect(issues.join('\n')).not.toContain(OLD);
    }
  });
});

const send = async (svc: Service): Promise<string> =>
  (await notifyNow(svc.db.pool, { topic: 'a.b', data: { n: 1 } }, 'tester', svc.fanOutContext)).body.job_ids[0]!;

describe('deliveries through a rotation', () => {
  let db: TestDatabase;
  let rx: Receiver;
  const services: Service[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db.drop());
  beforeEach(async () => {
    await db.pool.query(
      'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log cascade',
    );
    rx = await startReceiver();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.stop()));
    await rx.close();
  });

  const FAR = new Date(Date.now() + 24 * 3600_000).toISOString();
  const PAST = new Date(Date.now() - 60_000).toISOString();

  async function service(webhook: Record<string, unknown>, over: Record<string, unknown> = {}) {
    const base = { url: `${rx.url}/hook`, topics: ['a.*'], timeout: '2s' };
    const s = await startTestService(db, merge({ notify: { webhook: { ...base, ...webhook } } }, over));
    services.push(s.svc);
    return s.svc;
  }
  const job = async (id: string) => (await db.pool.query('select * from jobs where id = $1', [id])).rows[0];
  const completed = (id: string) => waitFor(async () => (await job(id))?.status === 'completed', 10_000);

  it('acw, during the overlap: the seed 003 verify with the old secret and verifyWebhook with [old, new] or the new one accept every delivery', async () => {
    const svc = await service({ secret: OLD, secret_next: NEW, rotate_until: FAR });
    const ids = [await send(svc), await send(svc), await send(svc)];
    for (const id of ids) await completed(id);
    expect(rx.requests).toHaveLength(3);
    for (const req of rx.requests) {
      expect(req.headers['x-acw-signature-next']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(seed003Verify(OLD, req)).toBe(true);
      expect(seed003Verify(NEW, req)).toBe(false); // the one-secret check reads X-ACW-Signature only: the owner switches after the overlap
      expect(verifyWebhook({ secret: [OLD, NEW], headers: req.headers, body: req.body })).toBe(true);
      expect(verifyWebhook({ secret: [NEW], headers: req.headers, body: req.body })).toBe(true);
      expect(verifyWebhook({ secret: 'other', headers: req.headers, body: req.body })).toBe(false);
    }
  });

  it('acw, after rotate_until: only the new secret signs, in X-ACW-Signature', async () => {
    const svc = await service({ secret: OLD, secret_next: NEW, rotate_until: PAST });
    await completed(await send(svc));
    const [req] = rx.requests;
    expect(req!.headers['x-acw-signature-next']).toBeUndefined();
    expect(seed003Verify(NEW, req!)).toBe(true);
    expect(seed003Verify(OLD, req!)).toBe(false);
    expect(verifyWebhook({ secret: [OLD, NEW], headers: req!.headers, body: req!.body })).toBe(true);
    expect(verifyWebhook({ secret: [NEW], headers: req!.headers, body: req!.body })).toBe(true);
    expect(verifyWebhook({ secret: OLD, headers: req!.headers, body: req!.body })).toBe(false);
  });

  it('standard: the standardwebhooks library accepts with either secret during the overlap, only the new one after it', async () => {
    const during = await service({ scheme: 'standard', secret: OLD_WH, secret_next: NEW_WH, rotate_until: FAR });
    await completed(await send(during));
    await during.stop();
    const [req] = rx.requests;
    expect(String(req!.headers['webhook-signature'])).toMatch(/^v1,\S+ v1,\S+$/);
    expect(new Webhook(OLD_WH).verify(req!.body.toString('utf8'), flat(req!))).toMatchObject({ topic: 'a.b' });
    expect(new Webhook(NEW_WH).verify(req!.body.toString('utf8'), flat(req!))).toMatchObject({ topic: 'a.b' });

    const afterSvc = await service({ scheme: 'standard', secret: OLD_WH, secret_next: NEW_WH, rotate_until: PAST });
    await completed(await send(afterSvc));
    const last = rx.requests[1]!;
    expect(String(last.headers['webhook-signature'])).toMatch(/^v1,\S+$/);
    expect(new Webhook(NEW_WH).verify(last.body.toString('utf8'), flat(last))).toMatchObject({ topic: 'a.b' });
    expect(() => new Webhook(OLD_WH).verify(last.body.toString('utf8'), flat(last))).toThrow(/No matching signature/);
  });

  it('retries of an old job are signed with the secrets current at each attempt: before, during and after the overlap', async () => {
    rx.setResponder(() => ({ status: 500 }));
    const slow = { jobs: { retry: { base: '1h', max: '1h', jitter: 0 } } };
    const before = await service({ secret: OLD }, slow);
    const id = await send(before);
    await waitFor(async () => (await job(id)).attempts === 1 && (await job(id)).status === 'pending', 10_000);
    await before.stop();
    expect(rx.requests[0]!.headers['x-acw-signature-next']).toBeUndefined();
    // The rotation starts while the job waits for its retry: the retry carries both signatures.
    const during = await service({ secret: OLD, secret_next: NEW, rotate_until: FAR }, slow);
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    await waitFor(async () => (await job(id)).attempts === 2 && (await job(id)).status === 'pending', 10_000);
    await during.stop();
    const second = rx.requests[1]!;
    expect(second.headers['x-acw-event-id']).toBe(id);
    expect(seed003Verify(OLD, second)).toBe(true);
    expect(verifyWebhook({ secret: NEW, headers: second.headers, body: second.body })).toBe(true);
    // The overlap is over when the last retry comes (here: the config says so; the attempt reads the endpoint anew).
    rx.setResponder(() => ({ status: 200 }));
    await service({ secret: OLD, secret_next: NEW, rotate_until: PAST });
    await db.pool.query(`update jobs set run_at = now() where id = $1`, [id]);
    await completed(id);
    const retry = rx.requests.at(-1)!;
    expect(retry.headers['x-acw-event-id']).toBe(id);
    expect(retry.headers['x-acw-signature-next']).toBeUndefined();
    expect(seed003Verify(NEW, retry)).toBe(true);
    expect(verifyWebhook({ secret: OLD, headers: retry.headers, body: retry.body })).toBe(false);
  });

  it('the logs name no secret and no signature', async () => {
    const s = await startTestService(
      db,
      merge({ notify: { webhook: { url: `${rx.url}/hook`, topics: ['a.*'], secret: OLD, secret_next: NEW, rotate_until: FAR } } }, {}),
    );
    services.push(s.svc);
    await completed(await send(s.svc));
    const text = s.raw();
    expect(text).toContain('service.config');
    const req = rx.requests[0]!;
    for (const needle of [OLD, NEW, String(req.headers['x-acw-signature-next']).slice(7)]) expect(text).not.toContain(needle);
  });
});
