import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { call, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

// An endpoint stored through the API has its own propagate_trace (docs/operations.md#tracing):
// true sends traceparent with each POST, false never does, null follows the process's
// notify.webhook.propagate_trace; a PATCH reaches the next delivery; bad input changes nothing.

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/;

let db: TestDatabase;
let rx: Receiver;
let otlp: OtlpReceiver;
let api: Api | undefined;
let admin: string;
let producer: string;
const codec = codecOf(new SecretBox(randomBytes(32)))!;

const start = (propagate: boolean): Promise<Api> =>
  startApi(
    db,
    {
      tracing: { traces_endpoint: `${otlp.url}/v1/traces`, protocol: 'http/json' },
      notify: {
        webhook: {
          propagate_trace: propagate,
          circuit: { enabled: false },
          // Endpoints stored through the API go through the SSRF guard: let the test receiver in.
          allow_networks: ['127.0.0.0/8'],
        },
      },
    },
    'serve',
    { secretCodec: codec },
  );

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  otlp = await startOtlpReceiver();
  api = await start(false);
  admin = await makeUser(db.pool, 'ops', 'admin');
  producer = await makeUser(db.pool, 'shop', 'service');
}, 30_000);
afterAll(async () => {
  await api?.close();
  await Promise.all([rx?.close(), otlp?.close()]);
  await db?.drop();
});

/** One event to every endpoint (topic `t.n`); what each path got: its traceparent, or null. */
async function deliverOnce(a: Api, paths: readonly string[]): Promise<Record<string, string | null>> {
  const before = rx.requests.length;
  const res = await call(a.url, 'POST', '/v1/notify', { token: producer, body: { topic: 't.n', data: {} } });
  expect(res.body.job_ids).toHaveLength(paths.length);
  const got = await rx.waitForRequests(before + paths.length, 15_000);
  const out: Record<string, string | null> = {};
  for (const r of got.slice(before)) out[r.url.slice(1)] = (r.headers['traceparent'] as string | undefined) ?? null;
  return out;
}

const sent = (tp: string | null) => tp !== null && TRACEPARENT.test(tp);

describe('propagate_trace of endpoints stored through the API', () => {
  it('true sends traceparent, false never, null the default; a PATCH reaches delivery; "yes" is refused naming it', async () => {
    const make = async (name: string, propagate: boolean | null | undefined) => {
      const body = { name, url: `${rx.url}/${name}`, topics: ['t.*'], ...(propagate === undefined ? {} : { propagate_trace: propagate }) };
      const res = await call(api!.url, 'POST', '/v1/endpoints', { token: admin, body });
      expect(res.status).toBe(201);
      return res.body.propagate_trace as boolean | null;
    };
    expect([await make('on', true), await make('off', false), await make('dflt', null), await make('unset', undefined)]).toEqual([
      true,
      false,
      null,
      null,
    ]);
    const rows = await db.pool.query(`select name, propagate_trace from endpoints order by name`);
    expect(rows.rows).toEqual([
      { name: 'dflt', propagate_trace: null },
      { name: 'off', propagate_trace: false },
      { name: 'on', propagate_trace: true },
      { name: 'unset', propagate_trace: null },
    ]);

    // This process's default is off.
    const first = await deliverOnce(api!, ['on', 'off', 'dflt', 'unset']);
    expect({ on: sent(first.on!), off: first.off, dflt: first.dflt, unset: first.unset }).toEqual({
      on: true,
      off: null,
      dflt: null,
      unset: null,
    });

    // Bad input: a 400 naming the field, nothing changed or created.
    const audit = async () => (await db.pool.query(`select count(*)::int as n from audit_log`)).rows[0].n as number;
    const auditBefore = await audit();
    const patched = await call(api!.url, 'PATCH', '/v1/endpoints/off', { token: admin, body: { propagate_trace: 'yes' } });
    expect(patched.status).toBe(400);
    expect(patched.body.error.details.field).toBe('propagate_trace');
    expect(patched.body.error.message).toMatch(/^propagate_trace: /);
    const created = await call(api!.url, 'POST', '/v1/endpoints', {
      token: admin,
      body: { name: 'bad', url: `${rx.url}/bad`, topics: ['t.*'], propagate_trace: 'yes' },
    });
    expect([created.status, created.body.error.details.field]).toEqual([400, 'propagate_trace']);
    expect((await db.pool.query(`select name, propagate_trace from endpoints order by name`)).rows).toEqual(rows.rows);
    expect(await audit()).toBe(auditBefore);
    expect((await call(api!.url, 'GET', '/v1/endpoints/off', { token: admin })).body.propagate_trace).toBe(false);

    // PATCH: off turned on, on cleared back to the default (off here), in the running service.
    const turned = await call(api!.url, 'PATCH', '/v1/endpoints/off', { token: admin, body: { propagate_trace: true } });
    expect(turned.body.propagate_trace).toBe(true);
    const cleared = await call(api!.url, 'PATCH', '/v1/endpoints/on', { token: admin, body: { propagate_trace: null } });
    expect(cleared.body.propagate_trace).toBe(null);
    const changes = await db.pool.query(`select target_id, details from audit_log where action = 'endpoint.updated' order by id`);
    expect(changes.rows).toEqual([
      { target_id: 'off', details: { changed: { propagate_trace: { from: false, to: true } } } },
      { target_id: 'on', details: { changed: { propagate_trace: { from: true, to: null } } } },
    ]);
    const second = await deliverOnce(api!, ['on', 'off', 'dflt', 'unset']);
    expect({ on: second.on, off: sent(second.off!), dflt: second.dflt }).toEqual({ on: null, off: true, dflt: null });

    // The same rows under a process whose default is on: null follows it, false does not.
    await call(api!.url, 'PATCH', '/v1/endpoints/off', { token: admin, body: { propagate_trace: false } });
    await api!.close();
    api = undefined;
    api = await start(true);
    const third = await deliverOnce(api, ['on', 'off', 'dflt', 'unset']);
    expect({ on: sent(third.on!), off: third.off, dflt: sent(third.dflt!), unset: sent(third.unset!) }).toEqual({
      on: true,
      off: null,
      dflt: true,
      unset: true,
    });
  }, 60_000);
});
