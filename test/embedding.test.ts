import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as api from '../src/index.js';
import { PermanentError, WorkerPool, type ClaimedJob, type PeriodicRunner } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { startTestService } from './helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the public entry point', () => {
  it('exports the documented API and none of the queue internals', () => {
    expect(Object.keys(api).toSorted()).toEqual(
      [
        'ConfigError',
        'OutboxError',
        'PermanentError',
        'Scheduler',
        'Service',
        'WorkerPool',
        'channels',
        'createLogger',
        'createPool',
        'jobPurge',
        'jobReaper',
        'loadConfig',
        'migrate',
        'notify',
        'notifyMany',
        'parseConfig',
      ].toSorted(),
    );
  });
});

describe('embedding the service', () => {
  it('runs an application job type: a runner enqueues, the handler completes it, PermanentError sends one to dead with its audit row', async () => {
    const seen: ClaimedJob[] = [];
    const runner: PeriodicRunner = {
      name: 'workspace_fetch',
      intervalMs: 60_000,
      cluster: false,
      run: async () => {
        await svcRef.svc?.enqueue([
          { type: 'workspace.fetch', payload: { workspace_id: 42 }, maxAttempts: 3 },
          { type: 'workspace.fetch', payload: {}, maxAttempts: 3 },
        ]);
      },
    };
    const svcRef: { svc?: Awaited<ReturnType<typeof startTestService>>['svc'] } = {};
    const started = await startTestService(
      db,
      {},
      {
        handlers: {
          'workspace.fetch': async (job) => {
            seen.push(job);
            if (!(job.payload as { workspace_id?: number }).workspace_id) throw new PermanentError('no workspace_id');
          },
        },
      },
    );
    svcRef.svc = started.svc;
    try {
      started.svc.scheduler.register(runner);
      const rows = await waitFor(async () => {
        const r = await db.pool.query<{ status: string; payload: { workspace_id?: number } }>(
          `select status, payload from jobs where type = 'workspace.fetch' order by created_at`,
        );
        return r.rows.length === 2 && r.rows.every((x) => x.status !== 'pending' && x.status !== 'running') ? r.rows : undefined;
      }, 'both jobs to finish');
      expect(rows.map((r) => `${r.payload.workspace_id ?? 'none'}:${r.status}`).toSorted()).toEqual(['42:completed', 'none:dead']);
      expect(seen).toHaveLength(2);
      const audit = await db.pool.query(`select details->>'reason' as reason from audit_log where action = 'job.dead_letter'`);
      expect(audit.rows).toEqual([{ reason: 'permanent' }]);
    } finally {
      await started.svc.stop();
    }
  });
});

describe('WorkerPool.registerHandler', () => {
  it('adds a job type before start, and refuses one after start or twice', async () => {
    const done: string[] = [];
    const wp = new WorkerPool({
      pool: db.pool,
      url: db.url,
      channel: 'public.acw_jobs',
      handlers: {},
      concurrency: 2,
      leaseMs: 10_000,
      pollMs: 200,
      shutdownGraceMs: 1_000,
      retry: { base: 10, max: 10, jitter: 0 },
    });
    wp.registerHandler('app.ping', async (job) => {
      done.push(job.id);
    });
    expect(() => wp.registerHandler('app.ping', async () => undefined)).toThrow(/registered already/);
    await wp.start();
    try {
      expect(() => wp.registerHandler('app.other', async () => undefined)).toThrow(/has started/);
      const ins = await db.pool.query<{ id: string }>(`insert into jobs (type, payload) values ('app.ping', '{}') returning id`);
      const id = ins.rows[0]!.id;
      await waitFor(async () => (done.includes(id) ? true : undefined), 'the registered handler to run');
    } finally {
      await wp.stop();
    }
  });
});
