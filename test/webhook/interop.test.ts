// End-to-end signature checks: a real delivery, verified by the receivers we promise to satisfy.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/verify.js';
import { createDeliveryAgent, sendWebhook } from '../../src/webhook/send.js';
import { buildHeaders, type SignatureScheme } from '../../src/webhook/sign.js';
import { buildBody } from '../../src/webhook/job.js';
import { rawHeaderObject, startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';

const SEED_003 = fileURLToPath(new URL('../helpers/seed003_verify.py', import.meta.url));
const ACW_SECRET = 'interop-acw-secret-🔑';
const WHSEC = `whsec_${Buffer.from('interop-standard-key-0123456789').toString('base64')}`;
const JOB = '9a0e6f0c-5b7d-4f2e-8c1a-2b3c4d5e6f70';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

/** One real delivery through sendWebhook; returns what the receiver got. */
async function deliver(scheme: SignatureScheme): Promise<ReceivedRequest> {
  const body = buildBody({
    id: '1f2e3d4c-0000-4000-8000-00000000abcd',
    topic: 'order.paid',
    occurredAt: new Date(),
    data: { amount: 12.5, note: 'naïve café ✓', nested: { list: [1, 'two', null] } },
  });
  const headers = buildHeaders({
    scheme,
    secret: scheme === 'acw' ? ACW_SECRET : WHSEC,
    jobId: JOB,
    topic: 'order.paid',
    body,
    timestamp: Math.floor(Date.now() / 1000),
    extra: { 'X-Tenant': 'acme' },
  });
  const before = receiver.requests.length;
  // A connection of its own for each delivery: the Python checks block this process (and the
  // receiver in it) for seconds on a busy machine, long enough for the receiver to close an idle
  // kept-alive connection just as the next delivery is written to it (ECONNRESET). The subject
  // here is the signature, not connection reuse (test/webhook/send-receiver.test.ts covers that).
  const agent = createDeliveryAgent();
  const res = await sendWebhook({ agent, url: `${receiver.url}/hooks`, headers, body, timeoutMs: 5_000 }).finally(() => agent.close());
  expect(res.outcome).toEqual({ kind: 'delivered', status: 200 });
  const got = receiver.requests[before];
  if (!got) throw new Error('receiver saw no request');
  return got;
}

function seed003Verify(secret: string, headers: Record<string, string | string[]>, body: Buffer): string {
  const input = JSON.stringify({ secret, headers, body_b64: body.toString('base64') });
  return execFileSync('python3', [SEED_003], { input, encoding: 'utf8', timeout: 10_000 }).trim();
}

describe('acw scheme deliveries', () => {
  it('are accepted by the seed 003 Python verify function, reading the exact header names', async () => {
    const got = await deliver('acw');
    expect(seed003Verify(ACW_SECRET, rawHeaderObject(got.rawHeaders), got.body)).toBe('True');
  });

  it('are rejected by the seed 003 Python verify function when the body is tampered with', async () => {
    const got = await deliver('acw');
    const tampered = Buffer.from(got.body.toString('utf8').replace('12.5', '1250'));
    expect(seed003Verify(ACW_SECRET, rawHeaderObject(got.rawHeaders), tampered)).toBe('False');
  });

  it('are accepted by verifyWebhook with Node request headers and the raw body', async () => {
    const got = await deliver('acw');
    expect(verifyWebhook({ secret: ACW_SECRET, headers: got.headers, body: got.body })).toBe(true);
    expect(verifyWebhook({ secret: 'wrong', headers: got.headers, body: got.body })).toBe(false);
  });

  it('carry the protocol headers and the endpoint extra header', async () => {
    const got = await deliver('acw');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-agent']).toMatch(/^acw-webhooks\/\d+\.\d+\.\d+/);
    expect(got.headers['x-acw-topic']).toBe('order.paid');
    expect(got.headers['x-acw-event-id']).toBe(JOB);
    expect(got.headers['x-tenant']).toBe('acme');
    expect(JSON.parse(got.body.toString('utf8'))).toMatchObject({ topic: 'order.paid', data: { amount: 12.5 } });
  });
});

describe('standard scheme deliveries', () => {
  it('are accepted by the standardwebhooks library', async () => {
    const got = await deliver('standard');
    const headers = Object.fromEntries(Object.entries(got.headers).map(([k, v]) => [k, String(v)]));
    const payload = new Webhook(WHSEC).verify(got.body.toString('utf8'), headers);
    expect(payload).toMatchObject({ topic: 'order.paid' });
    expect(got.headers['webhook-id']).toBe(JOB);
  });

  it('are rejected by the standardwebhooks library when tampered with', async () => {
    const got = await deliver('standard');
    const headers = Object.fromEntries(Object.entries(got.headers).map(([k, v]) => [k, String(v)]));
    expect(() => new Webhook(WHSEC).verify(`${got.body.toString('utf8')} `, headers)).toThrow(/No matching signature/);
  });

  it('are accepted by verifyWebhook', async () => {
    const got = await deliver('standard');
    expect(verifyWebhook({ secret: WHSEC, headers: got.headers, body: got.body })).toBe(true);
  });
});
