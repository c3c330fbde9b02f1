// A database that refuses writes (issue 18, item 3), simulated with default_transaction_read_only:
// every write route answers 503, nothing is acknowledged that was not written, no row changes, and
// the service works again by itself once writes do.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { call, insertJob, makeUser, metricValue, rowCounts, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver } from '../helpers/receiver.js';

let db: TestDatabase;
let api: Api;
let admin: string;
let service: string;
let deadJob: string;
let pendingJob: string;

/** Turn read-only on or off for new sessions, and end the open ones so every pool reconnects with it. */
async function readOnly(on: boolean): Promise<void> {
  const c = await db.pool.connect();
  try {
    await c.query(`set default_transaction_read_only = off`);
    await c.query(
      on
        ? `alter database ${db.name} set default_transaction_read_only = on`
        : `alter database ${db.name} reset default_transaction_read_only`,
    );
    await c.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [db.name]);
  } finally {
    c.release(true);
  }
}

const refused = (l: Record<string, unknown>): boolean => /read-only transaction/.test(String(l['err']));

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startApi(
    db,
    {
      jobs: { enabled: false },
      notify: {
        webhook: {
          allow_networks: ['127.0.0.0/8'],
          endpoints: [{ name: 'cfg', url: 'http://127.0.0.1:9/cfg', secret: 'cfg-secret-123456', topics: ['*'] }],
        },
      },
    },
    'serve',
    { secretCodec: codecOf(new SecretBox(randomBytes(32))) },
  );
  admin = await makeUser(db.pool, 'ops', 'admin');
  service = await makeUser(db.pool, 'svc', 'service');
  const created = await call(api.url, 'POST', '/v1/endpoints', {
    token: admin,
    body: { name: 'stored', url: 'http://127.0.0.1:9/s', topics: ['*'] },
  });
  if (created.status !== 201) throw new Error(`fixture: ${created.text}`);
  deadJob = await insertJob(db.pool, { status: 'dead', endpoint: 'cfg' });
  pendingJob = await insertJob(db.pool, { status: 'pending', endpoint: 'cfg' });
});
afterAll(async () => {
  await readOnly(false).catch(() => undefined);
  await api?.close();
  await db?.drop();
});

describe('a database that refuses writes', () => {
  it('every write route answers 503 and writes nothing; the service recovers by itself', { timeout: 60_000 }, async () => {
    const writes: Array<[string, string, unknown, string]> = [
      ['POST', '/v1/notify', { topic: 'a.b', data: {} }, service],
      ['POST', '/v1/notify/batch', { events: [{ topic: 'a.b', data: {} }] }, service],
      ['POST', `/v1/jobs/${deadJob}/retry`, undefined, admin],
      ['POST', `/v1/jobs/${pendingJob}/cancel`, undefined, admin],
      ['POST', '/v1/jobs/redrive', {}, admin],
      ['POST', '/v1/endpoints', { name: 'new-one', url: 'http://127.0.0.1:9/n', topics: ['*'] }, admin],
      ['PATCH', '/v1/endpoints/stored', { description: 'changed' }, admin],
      ['POST', '/v1/endpoints/stored/rotate-secret', {}, admin],
      ['POST', '/v1/endpoints/cfg/pause', undefined, admin],
      ['POST', '/v1/endpoints/cfg/test', undefined, admin],
      ['POST', '/v1/endpoints/cfg/replay', { since: '1h', status: 'all' }, admin],
      ['DELETE', '/v1/endpoints/stored?force=true', undefined, admin],
    ];
    const before = await rowCounts(db.pool);
    await readOnly(true);
    const answers: string[] = [];
    for (const [method, path, body, token] of writes) {
      const r = await call(api.url, method, path, { token, ...(body === undefined ? {} : { body }) });
      answers.push(`${method} ${path} -> ${r.status} ${r.body?.error?.code ?? ''}`);
    }
    // Each one a 503 saying the database is unavailable: never a 2xx for what was not written, never a 500.
    expect(answers).toEqual(writes.map(([m, p]) => `${m} ${p} -> 503 unavailable`));
    expect(await rowCounts(db.pool)).toEqual(before);

    await readOnly(false);
    const ok = await waitFor(async () => {
      const r = await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'a.b', data: { after: true } } });
      return r.status === 202 ? r : null;
    }, 20_000);
    expect(ok.body.job_ids.length).toBeGreaterThan(0);
  });

  it('the runners say so once a minute, not at every claim or tick, and deliver once writes work again', { timeout: 60_000 }, async () => {
    const rx = await startReceiver();
    // Runners on: a claim every 500 ms (poll_interval), the reaper every 200 ms (test config).
    const workers = await startApi(db, {
      notify: { webhook: { endpoints: [{ name: 'cfg', url: rx.url, secret: 'cfg-secret-123456', topics: ['*'] }] } },
    });
    try {
      // Due in an hour: not claimed before the database turns read-only; made due by a session that may write.
      for (let i = 0; i < 5; i++) await insertJob(db.pool, { status: 'pending', endpoint: 'cfg' });
      await readOnly(true);
      const c = await db.pool.connect();
      try {
        await c.query(`set default_transaction_read_only = off`);
        await c.query(`update jobs set run_at = now() where status = 'pending'`);
      } finally {
        c.release();
      }
      // Every failed run is counted (acw_runner_errors_total) though the log says it once a minute:
      // wait for 20 failed reaper runs (it asks for its turn every 50 ms) and for a failed claim.
      const reaperErrors = async () =>
        metricValue((await call(workers.url, 'GET', '/metrics')).text, 'acw_runner_errors_total', { runner: 'job_reaper' }) ?? 0;
      await waitFor(async () => (await reaperErrors()) >= 20, 30_000, 100);
      await waitFor(() => workers.events('job.claim_error').some(refused), 30_000);
      // Only the read-only refusals: ending the sessions (pg_terminate_backend) may fail one claim or tick first, said once.
      const claims = workers.events('job.claim_error').filter(refused);
      const byRunner = new Map<string, number>();
      for (const l of workers.events('runner.error').filter(refused))
        byRunner.set(String(l['runner']), (byRunner.get(String(l['runner'])) ?? 0) + 1);
      expect(claims.length).toBe(1);
      // The reaper failed 20 times or more and said so once. The purge, the expiry sweep and the
      // counter rollup ask every minute, 15 s and 15 s: once each at most, if their turn fell in this window.
      expect(byRunner.get('job_reaper')).toBe(1);
      expect(
        [...byRunner].filter(([runner, n]) => n !== 1 || !['job_reaper', 'job_purge', 'job_expiry', 'stats_rollup'].includes(runner)),
      ).toEqual([]);

      // Counted while writes are still refused (nothing can be claimed): once they work again the
      // workers may deliver them before a count made afterwards (it was 0 once on a fast run).
      const pending = (await db.pool.query(`select count(*)::int as n from jobs where status = 'pending' and endpoint = 'cfg'`)).rows[0]
        .n as number;
      expect(pending).toBeGreaterThanOrEqual(5);
      await readOnly(false);
      await waitFor(() => rx.requests.length >= pending, 30_000);
    } finally {
      await workers.close();
      await rx.close();
    }
  });
});
