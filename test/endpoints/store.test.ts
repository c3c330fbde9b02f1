// The stored endpoints' writes (src/endpoints/store.ts) called directly against PostgreSQL, without
// a service or HTTP: what each write puts in the row, the audit log and the NOTIFY, and every
// refusal. test/endpoints/stored.test.ts covers the same writes end to end.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { headerContext, secretContext } from '../../src/endpoints/codec.js';
import {
  codecOf,
  createStoredEndpoint,
  deleteStoredEndpoint,
  readStoredEndpoints,
  rotateStoredSecret,
  toEndpoint,
  updateStoredEndpoint,
  type Actor,
  type StoreContext,
} from '../../src/endpoints/store.js';
import { ApiError } from '../../src/errors.js';
import { insertJob } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';

const codec = codecOf(new SecretBox(randomBytes(32)))!;
const config = parseConfig({});
const CHANNEL = 'test_endpoint_defs';
const ADMIN: Actor = { name: 'ops', role: 'admin' };
const SERVICE: Actor = { name: 'billing-svc', role: 'service' };
const WHSEC = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

let db: TestDatabase;
let listener: pg.Client;
const notified: string[] = [];
/** Every URL the store asked the SSRF check about. */
const checked: string[] = [];

function ctx(over: Partial<StoreContext> = {}): StoreContext {
  return {
    pool: db.pool,
    codec,
    configNames: new Set(['from-config']),
    channel: CHANNEL,
    serviceTopics: ['billing.*'],
    tombstoneMs: 60_000,
    checkUrl: async (url) => {
      checked.push(url);
      if (url.includes('blocked.example')) throw new ApiError(400, 'invalid_input', 'url: blocked here', { field: 'url' });
    },
    ...over,
  };
}

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  if (err instanceof ApiError) return err;
  throw new Error(`expected an ApiError, got ${String(err)}`);
}

async function row(name: string) {
  return (await db.pool.query(`select * from endpoints where name = $1`, [name])).rows[0] as Record<string, unknown> | undefined;
}

async function audits(name: string) {
  return (
    await db.pool.query<{ action: string; actor: string; target_type: string; details: Record<string, unknown> }>(
      `select action, actor, target_type, details from audit_log where target_id = $1 order by id`,
      [name],
    )
  ).rows;
}

async function counts() {
  const r = await db.pool.query<{ e: number; a: number; s: number }>(
    `select (select count(*)::int from endpoints) as e, (select count(*)::int from audit_log) as a, (select count(*)::int from endpoint_state) as s`,
  );
  return r.rows[0];
}

const create = (name: string, over: Record<string, unknown> = {}, actor: Actor = ADMIN, c = ctx()) =>
  createStoredEndpoint(c, { name, url: `https://${name}.example.com/h`, topics: ['billing.paid'], ...over }, actor);

beforeAll(async () => {
  db = await createTestDatabase();
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel === CHANNEL) notified.push(n.payload ?? '');
  });
  await listener.query(`listen ${CHANNEL}`);
});
afterAll(async () => {
  await listener.end();
  await db.drop();
});
beforeEach(() => {
  notified.length = 0;
  checked.length = 0;
});

describe('create', () => {
  it('writes the row with its defaults, the secret and header values sealed for it, a fresh state row, an audit row and a NOTIFY', async () => {
    await db.pool.query(`insert into endpoint_state (endpoint, circuit, opened_at) values ('fresh', 'open', now())`);
    const { row: created, secret } = await create('fresh', { headers: { 'X-Token': 'tok-123' } });
    // Generated for scheme acw: base64url of 32 bytes, returned once.
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({
      name: 'fresh',
      url: 'https://fresh.example.com/h',
      topics: ['billing.paid'],
      scheme: 'acw',
      headers_sealed: true,
      timeout_ms: null,
      max_in_flight: null,
      rate_limit: null,
      enabled: true,
      description: '',
      secret_next: null,
      rotate_until: null,
      owner: 'ops',
    });
    expect(codec.open(created.secret, secretContext('fresh', 'secret'))).toBe(secret);
    expect(codec.open(created.headers['X-Token']!, headerContext('fresh', 'X-Token'))).toBe('tok-123');
    expect(checked).toEqual(['https://fresh.example.com/h']);
    // A name used before starts with a fresh state row.
    const st = await db.pool.query(`select circuit from endpoint_state where endpoint = 'fresh'`);
    expect(st.rows).toEqual([{ circuit: 'closed' }]);
    const [audit, ...more] = await audits('fresh');
    expect(more).toEqual([]);
    expect(audit).toMatchObject({ action: 'endpoint.created', actor: 'ops', target_type: 'endpoint' });
    expect(audit!.details).toMatchObject({ name: 'fresh', url: 'https://fresh.example.com/h', headers: ['X-Token'], owner: 'ops' });
    expect(Object.keys(audit!.details)).not.toContain('secret');
    expect(Object.keys(audit!.details)).not.toContain('secret_next');
    expect(Object.keys(audit!.details)).not.toContain('headers_sealed');
    expect(JSON.stringify(audit)).not.toContain(secret);
    await waitFor(() => notified.includes('fresh'));
  });

  it('keeps what it is given: secret, scheme, limits, state and description', async () => {
    const { row: r, secret } = await create('given', {
      scheme: 'standard',
      secret: WHSEC,
      timeout: 2_500,
      max_in_flight: 3,
      rate_limit: '5/s',
      enabled: false,
      description: 'given values',
    });
    expect(secret).toBe(WHSEC);
    expect(r).toMatchObject({
      scheme: 'standard',
      timeout_ms: 2_500,
      max_in_flight: 3,
      rate_limit: '5/s',
      enabled: false,
      description: 'given values',
    });
    expect(codec.open(r.secret, secretContext('given', 'secret'))).toBe(WHSEC);
    const { secret: generated } = await create('gen-standard', { scheme: 'standard' });
    expect(generated).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  });

  it('refuses, writing nothing: a config name, a taken name, a standard endpoint without a whsec_ secret, a blocked URL, topics outside a service grant', async () => {
    await create('taken');
    const before = await counts();
    const cases: Array<[() => Promise<unknown>, number, string, string]> = [
      [() => create('from-config'), 409, 'conflict', 'name: an endpoint named from-config is defined in the config file'],
      [() => create('taken'), 409, 'conflict', 'name: an endpoint named taken exists already'],
      [
        () => create('std', { scheme: 'standard', secret: 'not-a-whsec-secret' }),
        400,
        'invalid_input',
        'secret: scheme "standard" needs a secret like "whsec_<base64>"',
      ],
      [() => create('blocked', { url: 'https://blocked.example/h' }), 400, 'invalid_input', 'url: blocked here'],
      [
        () => create('svc', { topics: ['billing.paid', 'orders.new'] }, SERVICE),
        403,
        'forbidden',
        'topics[1]: "orders.new" is outside the topics granted to services (billing.*)',
      ],
    ];
    for (const [attempt, status, code, message] of cases) {
      const err = await refusal(attempt());
      expect([err.status, err.code, err.message]).toEqual([status, code, message]);
      // Each names its field.
      expect(err.details?.['field']).toBe(message.slice(0, message.indexOf(':')));
    }
    expect(await counts()).toEqual(before);
    // An acw endpoint takes any secret it is given.
    expect((await create('acw-any', { secret: 'not-a-whsec-secret' })).secret).toBe('not-a-whsec-secret');
  });

  it('a service creates within its grants, and owns what it creates', async () => {
    const { row: r } = await create('svc-own', { topics: ['billing.refund.*'] }, SERVICE);
    expect(r.owner).toBe('billing-svc');
  });

  it('a deleted name is kept for the tombstone retention, then free: the new endpoint starts afresh', async () => {
    await create('reused', { description: 'first', timeout: 1_000 });
    await deleteStoredEndpoint(ctx(), 'reused', false, ADMIN);
    const kept = await refusal(create('reused'));
    expect([kept.status, kept.code, kept.details]).toEqual([409, 'conflict', { field: 'name' }]);
    const deletedAt = (await row('reused'))!['deleted_at'] as Date;
    expect(kept.message).toBe(
      `name: reused belonged to an endpoint deleted at ${deletedAt.toISOString()}; the name is kept for its old jobs until ${new Date(
        deletedAt.getTime() + 60_000,
      ).toISOString()}`,
    );
    // Past the retention (the tombstone is an hour old, the retention a minute): a new endpoint, nothing of the old one.
    await db.pool.query(`update endpoints set deleted_at = now() - interval '1 hour' where name = 'reused'`);
    const { row: again, secret } = await create('reused', { description: 'second' });
    expect(again).toMatchObject({ description: 'second', timeout_ms: null, secret_next: null, rotate_until: null, enabled: true });
    expect(codec.open(again.secret, secretContext('reused', 'secret'))).toBe(secret);
    expect((await row('reused'))!['deleted_at']).toBeNull();
    expect(again.created_at.getTime()).toBeGreaterThan(deletedAt.getTime());
    expect((await readStoredEndpoints(db.pool)).map((r) => r.name)).toContain('reused');
  });
});

describe('without an SSRF check (the CLI on a trusted host)', () => {
  it('creates and changes the URL unchecked', async () => {
    const { checkUrl: _none, ...unchecked } = ctx();
    await createStoredEndpoint(unchecked, { name: 'unchecked', url: 'https://blocked.example/h', topics: ['a.b'] }, ADMIN);
    const r = await updateStoredEndpoint(unchecked, 'unchecked', { url: 'https://blocked.example/2' }, ADMIN);
    expect(r.url).toBe('https://blocked.example/2');
    expect(checked).toEqual([]);
  });
});

describe('the audit log never shows URL credentials', () => {
  it('in a create, or in an update (from and to)', async () => {
    await create('creds', { url: 'https://user:pw-one@creds.example.com/h?api_key=key-one' });
    await updateStoredEndpoint(ctx(), 'creds', { url: 'https://creds.example.com/h?token=key-two' }, ADMIN);
    const [created, updated] = await audits('creds');
    expect(new URL(created!.details['url'] as string).host).toBe('creds.example.com');
    const changed = (updated!.details['changed'] as Record<string, { from: string; to: string }>)['url']!;
    expect([new URL(changed.from).pathname, new URL(changed.to).pathname]).toEqual(['/h', '/h']);
    const text = JSON.stringify([created, updated]);
    for (const secret of ['pw-one', 'key-one', 'key-two']) expect(text).not.toContain(secret);
  });
});

describe('update', () => {
  it('changes the fields given, seals new header values, and audits what changed (from and to)', async () => {
    const { row: old } = await create('patched', { timeout: 1_000, max_in_flight: 2, rate_limit: '1/s', headers: { 'X-A': 'one' } });
    checked.length = 0;
    const updated = await updateStoredEndpoint(
      ctx(),
      'patched',
      {
        url: 'https://patched.example.com/new',
        topics: ['billing.refund'],
        timeout: 3_000,
        description: 'changed',
        enabled: false,
        headers: { 'X-B': 'two' },
        // Given but the same: not in the audit's changes.
        max_in_flight: 2,
      },
      ADMIN,
    );
    expect(updated).toMatchObject({
      url: 'https://patched.example.com/new',
      topics: ['billing.refund'],
      timeout_ms: 3_000,
      max_in_flight: 2,
      rate_limit: '1/s',
      description: 'changed',
      enabled: false,
      scheme: 'acw',
      headers_sealed: true,
    });
    expect(Object.keys(updated.headers)).toEqual(['X-B']);
    expect(codec.open(updated.headers['X-B']!, headerContext('patched', 'X-B'))).toBe('two');
    expect(updated.updated_at.getTime()).toBeGreaterThan(old.updated_at.getTime());
    expect(checked).toEqual(['https://patched.example.com/new']);
    const audit = (await audits('patched')).at(-1)!;
    expect(audit).toMatchObject({ action: 'endpoint.updated', actor: 'ops', target_type: 'endpoint' });
    expect(audit.details).toEqual({
      changed: {
        url: { from: 'https://patched.example.com/h', to: 'https://patched.example.com/new' },
        topics: { from: ['billing.paid'], to: ['billing.refund'] },
        timeout_ms: { from: 1_000, to: 3_000 },
        description: { from: '', to: 'changed' },
        enabled: { from: true, to: false },
        headers: { from: ['X-A'], to: ['X-B'] },
      },
    });
    expect(JSON.stringify(audit)).not.toMatch(/"one"|"two"/);
    await waitFor(() => notified.includes('patched'));
  });

  it('sets a rate limit and turns an endpoint on again', async () => {
    await create('toggled', { enabled: false });
    const r = await updateStoredEndpoint(ctx(), 'toggled', { rate_limit: '10/s', enabled: true }, ADMIN);
    expect([r.rate_limit, r.enabled]).toEqual(['10/s', true]);
  });

  it('clears a limit set to null and leaves the others as they were; a URL not given is not checked', async () => {
    await create('cleared', { timeout: 1_000, max_in_flight: 2, rate_limit: '1/s', description: 'kept' });
    checked.length = 0;
    const r = await updateStoredEndpoint(ctx(), 'cleared', { rate_limit: null, timeout: undefined }, ADMIN);
    expect(r).toMatchObject({ rate_limit: null, timeout_ms: 1_000, max_in_flight: 2, description: 'kept', enabled: true });
    const r2 = await updateStoredEndpoint(ctx(), 'cleared', { max_in_flight: 5, enabled: true }, ADMIN);
    expect(r2).toMatchObject({ rate_limit: null, timeout_ms: 1_000, max_in_flight: 5 });
    expect(checked).toEqual([]);
    expect((await audits('cleared')).at(-1)!.details).toEqual({ changed: { max_in_flight: { from: 2, to: 5 } } });
  });

  it('moves to scheme standard only with a whsec_ secret already', async () => {
    await create('to-std', { secret: 'plain-secret-0123456789' });
    const err = await refusal(updateStoredEndpoint(ctx(), 'to-std', { scheme: 'standard' }, ADMIN));
    expect([err.status, err.message]).toEqual([
      400,
      'scheme: the endpoint\'s secret is not a "whsec_<base64>" secret: create a new endpoint for scheme "standard"',
    ]);
    expect((await row('to-std'))!['scheme']).toBe('acw');
    await create('to-std-ok', { secret: WHSEC });
    expect((await updateStoredEndpoint(ctx(), 'to-std-ok', { scheme: 'standard' }, ADMIN)).scheme).toBe('standard');
    // Already standard: nothing to check.
    expect((await updateStoredEndpoint(ctx(), 'to-std-ok', { scheme: 'standard', description: 'x' }, ADMIN)).scheme).toBe('standard');
    expect((await updateStoredEndpoint(ctx(), 'to-std-ok', { scheme: 'acw' }, ADMIN)).scheme).toBe('acw');
  });

  it("refuses, changing nothing: a config endpoint, an unknown one, another service's, a blocked URL, a service without grants", async () => {
    await create('theirs', {}, { name: 'other-svc', role: 'service' });
    await create('mine', {}, SERVICE);
    const before = await counts();
    const cases: Array<[() => Promise<unknown>, number, string, string]> = [
      [
        () => updateStoredEndpoint(ctx(), 'from-config', { description: 'x' }, ADMIN),
        409,
        'config_endpoint',
        'name: endpoint from-config is defined in the config file: edit the file (pause and resume work here)',
      ],
      [() => updateStoredEndpoint(ctx(), 'nowhere', { description: 'x' }, ADMIN), 404, 'not_found', 'name: no endpoint named "nowhere"'],
      [() => updateStoredEndpoint(ctx(), 'theirs', { description: 'x' }, SERVICE), 404, 'not_found', 'name: no endpoint named "theirs"'],
      [() => updateStoredEndpoint(ctx(), 'mine', { url: 'https://blocked.example/x' }, SERVICE), 400, 'invalid_input', 'url: blocked here'],
      [
        () => updateStoredEndpoint(ctx(), 'mine', { topics: ['orders.x'] }, SERVICE),
        403,
        'forbidden',
        'topics[0]: "orders.x" is outside the topics granted to services (billing.*)',
      ],
      [
        () => updateStoredEndpoint(ctx({ serviceTopics: [] }), 'mine', { description: 'x' }, SERVICE),
        403,
        'forbidden',
        'role service may not manage endpoints: notify.webhook.service_endpoints.topics grants none',
      ],
    ];
    for (const [attempt, status, code, message] of cases) {
      const err = await refusal(attempt());
      expect([err.status, err.code, err.message]).toEqual([status, code, message]);
      // Each names its field, but for the refusal of every topic (no grants at all).
      expect(err.details?.['field']).toBe(message.startsWith('role ') ? undefined : message.slice(0, message.indexOf(':')));
    }
    expect(await counts()).toEqual(before);
    expect((await row('mine'))!['description']).toBe('');
    // Its own, within its grants: changed.
    expect((await updateStoredEndpoint(ctx(), 'mine', { topics: ['billing.x'] }, SERVICE)).topics).toEqual(['billing.x']);
    // An admin may change anyone's, whatever services are granted.
    expect((await updateStoredEndpoint(ctx({ serviceTopics: [] }), 'theirs', { description: 'by ops' }, ADMIN)).description).toBe('by ops');
  });
});

describe('delete', () => {
  it('is refused while jobs are pending; with force cancels them; leaves a tombstone with no credential', async () => {
    await create('doomed', { headers: { 'X-Token': 'tok' } });
    await db.pool.query(`insert into endpoint_state (endpoint) values ('doomed') on conflict do nothing`);
    for (let i = 0; i < 2; i++) await insertJob(db.pool, { status: 'pending', endpoint: 'doomed' });
    await insertJob(db.pool, { status: 'completed', endpoint: 'doomed' });
    const err = await refusal(deleteStoredEndpoint(ctx(), 'doomed', false, ADMIN));
    expect([err.status, err.code, err.message, err.details]).toEqual([
      409,
      'endpoint_has_jobs',
      'name: endpoint doomed has 2 pending jobs: delete with ?force=true to cancel them',
      { field: 'name', pending_jobs: 2 },
    ]);
    expect((await row('doomed'))!['deleted_at']).toBeNull();

    expect(await deleteStoredEndpoint(ctx(), 'doomed', true, ADMIN)).toEqual({ cancelled_jobs: 2 });
    const jobs = await db.pool.query<{ status: string }>(`select status from jobs where endpoint = 'doomed' order by status`);
    expect(jobs.rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'completed']);
    const tomb = (await row('doomed'))!;
    expect(tomb).toMatchObject({ secret: '', secret_next: null, headers: {}, headers_sealed: true });
    expect(tomb['deleted_at']).toBeInstanceOf(Date);
    expect((await db.pool.query(`select 1 from endpoint_state where endpoint = 'doomed'`)).rowCount).toBe(0);
    expect((await audits('doomed')).at(-1)).toMatchObject({
      action: 'endpoint.deleted',
      actor: 'ops',
      target_type: 'endpoint',
      details: { cancelled_jobs: 2, force: true },
    });
    await waitFor(() => notified.includes('doomed'));
    expect((await readStoredEndpoints(db.pool)).map((r) => r.name)).not.toContain('doomed');
    // Gone for the API: a second delete does not find it.
    expect((await refusal(deleteStoredEndpoint(ctx(), 'doomed', true, ADMIN))).status).toBe(404);
  });

  it('without pending jobs needs no force, and says none were cancelled', async () => {
    await create('idle');
    await insertJob(db.pool, { status: 'dead', endpoint: 'idle' });
    expect(await deleteStoredEndpoint(ctx(), 'idle', false, ADMIN)).toEqual({ cancelled_jobs: 0 });
    expect((await audits('idle')).at(-1)!.details).toEqual({ cancelled_jobs: 0, force: false });
  });

  it('a service deletes only its own, and only with grants', async () => {
    await create('svc-del', {}, SERVICE);
    const none = await refusal(deleteStoredEndpoint(ctx({ serviceTopics: [] }), 'svc-del', false, SERVICE));
    expect([none.status, none.code]).toEqual([403, 'forbidden']);
    expect((await refusal(deleteStoredEndpoint(ctx(), 'svc-del', false, { name: 'other-svc', role: 'service' }))).status).toBe(404);
    expect((await row('svc-del'))!['deleted_at']).toBeNull();
    expect(await deleteStoredEndpoint(ctx(), 'svc-del', false, SERVICE)).toEqual({ cancelled_jobs: 0 });
  });
});

describe('rotate', () => {
  it('keeps the secret in force, seals the new one as secret_next until the overlap ends, audits without either', async () => {
    const { secret } = await create('rot', { secret: 'rotation-old-secret-01' });
    const before = Date.now();
    const r = await rotateStoredSecret(ctx(), 'rot', { overlap: '2h', secret: 'rotation-new-secret-02' }, ADMIN, config);
    expect(r.secret_next).toBe('rotation-new-secret-02');
    expect(r.generated).toBe(false);
    const until = Date.parse(r.rotate_until);
    expect(until).toBeGreaterThanOrEqual(before + 2 * 3_600_000);
    const stored = (await readStoredEndpoints(db.pool)).find((x) => x.name === 'rot')!;
    expect(stored.rotate_until?.getTime()).toBe(until);
    expect(codec.open(stored.secret, secretContext('rot', 'secret'))).toBe(secret);
    expect(codec.open(stored.secret_next!, secretContext('rot', 'secret_next'))).toBe('rotation-new-secret-02');
    expect(toEndpoint(stored, config, codec)).toMatchObject({ secret, secret_next: 'rotation-new-secret-02', rotate_until: until });
    const audit = (await audits('rot')).at(-1)!;
    expect(audit).toMatchObject({
      action: 'endpoint.secret_rotated',
      actor: 'ops',
      target_type: 'endpoint',
      details: { rotate_until: r.rotate_until, generated: false },
    });
    expect(JSON.stringify(audit)).not.toMatch(/rotation-(old|new)-secret/);
    await waitFor(() => notified.includes('rot'));
    // Under way: a second one is refused.
    expect((await refusal(rotateStoredSecret(ctx(), 'rot', {}, ADMIN, config))).status).toBe(409);
  });

  it('generates the new secret when none is given; a service rotates only its own, with grants', async () => {
    await create('rot-svc', {}, SERVICE);
    const none = await refusal(rotateStoredSecret(ctx({ serviceTopics: [] }), 'rot-svc', {}, SERVICE, config));
    expect([none.status, none.code]).toEqual([403, 'forbidden']);
    expect((await refusal(rotateStoredSecret(ctx(), 'rot-svc', {}, { name: 'x-svc', role: 'service' }, config))).status).toBe(404);
    const r = await rotateStoredSecret(ctx(), 'rot-svc', {}, SERVICE, config);
    expect(r.generated).toBe(true);
    expect(r.secret_next).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});
