import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { notifyNow } from '../../src/notify/notify.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startTestService } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
});

describe('service', () => {
  it('jobs.enabled: false starts neither dispatcher, scheduler nor workers', async () => {
    const ran: string[] = [];
    const { svc, events } = await startTestService(
      db,
      { jobs: { enabled: false }, notify: { webhook: { url: 'http://127.0.0.1:9/x', secret: 's', topics: ['*'] } } },
      { runners: [{ name: 'never', intervalMs: 10, cluster: false, run: async () => void ran.push('x') }] },
    );
    try {
      expect(svc.workers).toBeNull();
      expect(svc.outboxPump).toBeNull();
      // The application's runner was never registered (a registered one could be run by name).
      await expect(svc.scheduler.runNow('never')).rejects.toThrow(/no runner named never/);
      const ans = await notifyNow(svc.db.pool, { topic: 'a.b', data: {} }, 't', svc.fanOutContext);
      expect(ans.body.job_ids).toHaveLength(1);
      expect(events('jobs.disabled')).toHaveLength(1);
    } finally {
      await svc.stop();
    }
    // Stopped, the service will do nothing more: what it did not do by now, it never does (no sleep).
    expect((await db.pool.query('select status, attempts from jobs')).rows).toEqual([{ status: 'pending', attempts: 0 }]);
    expect(ran).toEqual([]);
  });

  it("runs an embedding application's own job handlers and periodic runners beside the built-in ones", async () => {
    const handled: unknown[] = [];
    let ticks = 0;
    const { svc } = await startTestService(
      db,
      {},
      {
        handlers: { 'app.thumbnail': async (job) => void handled.push(job.payload) },
        runners: [{ name: 'workspace_fetch', intervalMs: 20, cluster: false, run: async () => void ticks++ }],
      },
    );
    try {
      const { enqueueJobs } = await import('../../src/queue/transitions.js');
      await enqueueJobs(db.pool, [{ type: 'app.thumbnail', payload: { file: 'a.png' }, maxAttempts: 3 }], svc.channels.jobs);
      await waitFor(() => handled.length === 1 && ticks >= 2);
      expect(handled).toEqual([{ file: 'a.png' }]);
    } finally {
      await svc.stop();
    }
  });

  it('logs the effective config at start with secrets masked', async () => {
    const { svc, events, raw } = await startTestService(db, {
      notify: { webhook: { url: 'http://127.0.0.1:9/x', secret: 'very-secret-value', topics: ['*'] } },
      server: { auth: { users: [{ name: 'ops', role: 'admin', token: 'token-that-must-not-leak' }] } },
    });
    await svc.stop();
    expect(events('service.config')).toHaveLength(1);
    expect(raw()).not.toContain('very-secret-value');
    expect(raw()).not.toContain('token-that-must-not-leak');
    expect((await db.pool.query(`select name, role, token_hash is not null as hashed from users where name = 'ops'`)).rows).toEqual([
      { name: 'ops', role: 'admin', hashed: true },
    ]);
  });
});
