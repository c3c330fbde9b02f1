// Seed 003's config.yaml loads as it is (docs/integrate.md#periodic-runners): its application runner
// blocks (workspace_fetch, worktree_prune, attachment_cleanup) are accepted and handed to the
// runners of those names; names the host registers load the same way; any other key stays an error.
// And its checklist item 7: a scheduled purge tick removes an 8-day-old completed row, keeps a 6-day-old one.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig, runnerConfig } from '../../src/config/index.js';
import type { RunnerContext } from '../../src/runners/scheduler.js';
import { parse as parseYaml } from 'yaml';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startTestService } from '../helpers/service.js';

const SEED = fileURLToPath(new URL('../fixtures/seed003-config.yaml', import.meta.url));
const env = { WEBHOOK_SECRET: 'seed-003-secret' };

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe("seed 003's config.yaml", () => {
  it('loads as it is, with WEBHOOK_SECRET set', () => {
    const c = loadConfig({ path: SEED, env });
    expect(c.jobs.workers).toBe(2);
    expect(c.jobs.shutdown_grace).toBe(30_000);
    expect(c.jobs.job_purge.completed_retention).toBe(168 * 3600_000);
    expect(c.notify.webhook.topics).toEqual(['workspace.sync_failed', 'worktree.prune_pending']);
    expect(runnerConfig(c, 'workspace_fetch')).toEqual({ enabled: true, interval: 5 * 60_000 });
    expect(runnerConfig(c, 'worktree_prune')).toEqual({
      enabled: true,
      interval: 24 * 3600_000,
      idle_threshold: '720h',
      warning_lead: '72h',
    });
    expect(runnerConfig(c, 'attachment_cleanup')).toEqual({ enabled: true, interval: 24 * 3600_000, retention: '720h' });
    expect(runnerConfig(c, 'job_reaper')).toBeUndefined();
  });

  it('without WEBHOOK_SECRET names the key, as before', () => {
    expect(errorOf(() => loadConfig({ path: SEED, env: {} })).message).toContain('notify.webhook.secret');
  });

  it('still refuses a typo such as job_reeper, and a bad value inside a runner block', () => {
    const raw = parseYaml(readFileSync(SEED, 'utf8')) as { jobs: Record<string, unknown> };
    const typo = { ...raw, jobs: { ...raw.jobs, job_reeper: { enabled: true } } };
    expect(errorOf(() => parseConfig(typo, env)).message).toMatch(/jobs\.job_reeper: unknown key \(did you mean "job_reaper"\?\)/);
    const bad = { ...raw, jobs: { ...raw.jobs, workspace_fetch: { interval: 'often' } } };
    expect(errorOf(() => parseConfig(bad, env)).message).toMatch(/jobs\.workspace_fetch\.interval: expected a duration/);
    const scalar = { ...raw, jobs: { ...raw.jobs, attachment_cleanup: 5 } };
    expect(errorOf(() => parseConfig(scalar, env)).message).toMatch(/jobs\.attachment_cleanup: expected a mapping, got 5/);
  });

  it('accepts the names the host application registers, and only those', () => {
    const raw = { jobs: { my_sync: { interval: '10m', batch: 50 } } };
    expect(errorOf(() => parseConfig(raw)).message).toMatch(/jobs\.my_sync: unknown key/);
    const c = parseConfig(raw, {}, { runners: ['my_sync'] });
    expect(runnerConfig(c, 'my_sync')).toEqual({ enabled: true, interval: 600_000, batch: 50 });
    expect(errorOf(() => parseConfig({ jobs: { my_sync: { enabled: 'maybe' } } }, {}, { runners: ['my_sync'] })).message).toMatch(
      /jobs\.my_sync\.enabled: expected true or false/,
    );
  });
});

describe('runner blocks at run time', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('hands each block to the runner of that name (its interval too), skips a disabled one, and warns once for one with no runner', async () => {
    const seen: RunnerContext['config'][] = [];
    const { svc, events } = await startTestService(
      db,
      {
        jobs: {
          workspace_fetch: { enabled: true, interval: '100ms', note: 'idle only' },
          worktree_prune: { enabled: false, interval: '100ms' },
          attachment_cleanup: { interval: '24h', retention: '720h' },
        },
      },
      {
        runners: [
          { name: 'workspace_fetch', intervalMs: 3_600_000, cluster: false, run: async (ctx) => void seen.push(ctx.config) },
          { name: 'worktree_prune', intervalMs: 50, cluster: false, run: async () => void seen.push({ wrong: 'disabled ran' }) },
        ],
      },
    );
    try {
      // workspace_fetch runs at its configured 100 ms, not its own hour: a second run proves it.
      await waitFor(() => seen.length >= 2, 10_000);
      expect(seen.every((c) => c?.note === 'idle only' && c.interval === 100)).toBe(true);
      const warnings = events('config.warning').filter((l) => String(l.key ?? '').startsWith('jobs.'));
      expect(warnings.map((l) => l.key)).toEqual(['jobs.attachment_cleanup']);
      expect(String(warnings[0]!.warning)).toMatch(/no runner named "attachment_cleanup".*Service\.start\(\{ runners:/);
    } finally {
      await svc.stop();
    }
  });

  it('a scheduled purge tick removes an 8-day-old completed row and keeps a 6-day-old one (checklist item 7)', async () => {
    const ids = await db.pool.query<{ id: string; age: number }>(
      `insert into jobs (type, status, attempts, completed_at)
       select 'seed003.purge', 'completed', 1, now() - d * interval '1 day' from unnest(array[8, 6]) d
       returning id, extract(day from now() - completed_at)::int as age`,
    );
    const byAge = new Map(ids.rows.map((r) => [r.age, r.id]));
    const exists = async (id: string) => ((await db.pool.query('select 1 from jobs where id = $1', [id])).rowCount ?? 0) > 0;
    const { svc, events } = await startTestService(db, { jobs: { job_purge: { interval: '200ms' } } });
    try {
      await waitFor(async () => !(await exists(byAge.get(8)!)), 15_000);
      // A tick after the one that removed it still keeps the 6-day-old row.
      const ticks = events('job.purged').length;
      await waitFor(() => events('job.purged').length > ticks, 15_000);
      expect(await exists(byAge.get(6)!)).toBe(true);
    } finally {
      await svc.stop();
    }
  });
});
