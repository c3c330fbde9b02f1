// What the review of the endpoint-state and stored-endpoint work found, kept fixed: sealed secrets
// bound to their row, URL credentials out of audit rows, and open circuits released when the
// breaker is switched off.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf, createStoredEndpoint, readStoredEndpoints, toEndpoint, type StoreContext } from '../../src/endpoints/store.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const config = parseConfig({ notify: { webhook: { allow_networks: ['127.0.0.0/8'] } } });
const box = new SecretBox(randomBytes(32));

function store(): StoreContext {
  return {
    pool: db.pool,
    codec: codecOf(box)!,
    configNames: new Set(),
    channel: 'public.acw_endpoint_defs',
    serviceTopics: [],
    tombstoneMs: 60_000,
  };
}

describe('stored endpoints, after review', () => {
  it("a sealed secret copied into another endpoint's row does not open there", async () => {
    const admin = { name: 'ops', role: 'admin' as const };
    await createStoredEndpoint(
      store(),
      { name: 'alpha', url: 'https://a.example.com/h', topics: ['a.b'], secret: 'alpha-secret-0123456789' },
      admin,
    );
    await createStoredEndpoint(
      store(),
      { name: 'beta', url: 'https://b.example.com/h', topics: ['a.b'], secret: 'beta-secret-0123456789' },
      admin,
    );
    const rows = await readStoredEndpoints(db.pool);
    expect(rows.map((r) => toEndpoint(r, config, codecOf(box)!).secret)).toEqual(['alpha-secret-0123456789', 'beta-secret-0123456789']);
    await db.pool.query(`update endpoints set secret = (select secret from endpoints where name = 'alpha') where name = 'beta'`);
    const beta = (await readStoredEndpoints(db.pool)).find((r) => r.name === 'beta')!;
    expect(() => toEndpoint(beta, config, codecOf(box)!)).toThrow(/tampered|authenticat/i);
  });

  it('URL credentials never reach the audit row of a create', async () => {
    // user-info is refused by the API's input schema; the store itself (with no URL check here) writes it, and must still not leak it.
    const { row } = await createStoredEndpoint(
      store(),
      { name: 'gamma', url: 'https://user:pw-in-url@g.example.com/h?api_key=query-key-123', topics: ['a.b'] },
      { name: 'ops', role: 'admin' },
    );
    expect(row.url).toBe('https://user:pw-in-url@g.example.com/h?api_key=query-key-123');
    await createStoredEndpoint(
      store(),
      { name: 'delta', url: 'https://d.example.com/h?api_key=query-key-456', topics: ['a.b'] },
      { name: 'ops', role: 'admin' },
    );
    const rows = (
      await db.pool.query<{ target_id: string; details: { url: string } }>(
        `select target_id, details from audit_log where action = 'endpoint.created' and target_id in ('gamma', 'delta') order by id`,
      )
    ).rows;
    // Both audited, each URL there with its credentials masked (so the scan below has something to look at).
    expect(rows.map((r) => r.target_id)).toEqual(['gamma', 'delta']);
    expect(rows.map((r) => new URL(r.details.url).host)).toEqual(['g.example.com', 'd.example.com']);
    const audit = JSON.stringify(rows);
    expect(audit).not.toContain('query-key-456');
    expect(audit).not.toContain('pw-in-url');
    expect(audit).not.toContain('query-key-123');
  });

  it('a circuit left open is closed when a process starts with the breaker off, and its jobs are delivered', async () => {
    const rx = await startReceiver();
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, opened_at, next_probe_at, cooldown_ms)
       values ('stuck', 'open', now() - interval '1 hour', now() + interval '1 hour', 600000)
       on conflict (endpoint) do update set circuit = 'open', next_probe_at = now() + interval '1 hour'`,
    );
    const { svc, lines } = await startTestService(db, {
      notify: { webhook: { circuit: { enabled: false }, endpoints: [{ name: 'stuck', url: `${rx.url}/s`, secret: 's', topics: ['*'] }] } },
    });
    try {
      const st = await db.pool.query<{ circuit: string }>(`select circuit from endpoint_state where endpoint = 'stuck'`);
      expect(st.rows[0]!.circuit).toBe('closed');
      expect(lines.some((l) => l.event === 'endpoint.circuit_closed' && l.reason === 'circuit_disabled')).toBe(true);
      await svc.enqueue([{ type: 'webhook.deliver', payload: { topic: 'a.b', body: '{}' }, maxAttempts: 3, endpoint: 'stuck' }]);
      await waitFor(() => rx.requests.length === 1);
    } finally {
      await svc.stop();
      await rx.close();
    }
  });
});
