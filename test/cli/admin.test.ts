import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { jsonLines, runCliInProcess, startCliInProcess, type CliInProcess, type CliResult } from '../helpers/cli.js';

let db: TestDatabase;
const procs: CliInProcess[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'truncate job_queue, job_history, job_counts, job_attempts, delivery_stats, event_log, event_keys, notifications, audit_log, users cascade',
  );
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop()));
});

async function cli(...args: string[]): Promise<CliResult> {
  return runCliInProcess(args, { ...process.env, DATABASE_URL: db.url, USER: 'tester' });
}
const lines = jsonLines;

async function deadJob(topic = 'a.b', endpoint = 'default'): Promise<string> {
  const r = await db.pool.query(
    `insert into jobs (type, payload, status, attempts, endpoint, last_error) values ('webhook.deliver', $1, 'dead', 6, $2, 'HTTP 500') returning id`,
    [{ topic, body: '{}' }, endpoint],
  );
  return r.rows[0].id;
}

/** The `n` of each alert a follower printed (its stdout lines; stderr lines are not JSON). */
const printed = (p: { lines: string[] }) => p.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l).n as number);

describe('operator CLI', () => {
  it('users add prints the token once, list never shows it, revoke writes audit rows naming who', async () => {
    const add = await cli('users', 'add', 'svc-a', '--role', 'service');
    expect(add.code).toBe(0);
    const { token } = JSON.parse(add.stdout);
    expect(token).toMatch(/^acw_[A-Za-z0-9_-]{40,}$/);
    const list = await cli('users', 'list');
    expect(lines(list.stdout)).toEqual([expect.objectContaining({ name: 'svc-a', role: 'service', revoked_at: null })]);
    expect(list.stdout).not.toContain(token);
    expect((await cli('users', 'add', 'svc-a', '--role', 'service')).code).toBe(1);
    expect((await cli('users', 'add', 'x', '--role', 'root')).code).toBe(2);
    expect((await cli('users', 'revoke', 'svc-a')).code).toBe(0);
    const audit = (await db.pool.query(`select action, actor from audit_log order by id`)).rows;
    expect(audit).toEqual([
      { action: 'user.add', actor: 'cli:tester' },
      { action: 'user.revoke', actor: 'cli:tester' },
    ]);
  });

  it('jobs list, show, retry and cancel', async () => {
    const dead = await deadJob();
    await db.pool.query(`insert into webhook_attempts (job_id, attempt, status_code, duration_ms) values ($1, 1, 500, 12)`, [dead]);
    const pending = (
      await db.pool.query(
        `insert into jobs (type, payload, run_at) values ('webhook.deliver', '{}', now() + interval '1 hour') returning id`,
      )
    ).rows[0].id;
    const list = lines((await cli('jobs', 'list', '--status', 'dead')).stdout);
    expect(list.map((j) => j.id)).toEqual([dead]);
    const show = JSON.parse((await cli('jobs', 'show', dead)).stdout);
    expect(show.deliveries).toEqual([expect.objectContaining({ attempt: 1, status_code: 500 })]);
    expect((await cli('jobs', 'show', 'not-a-uuid')).code).toBe(2);
    expect((await cli('jobs', 'retry', dead)).code).toBe(0);
    expect((await db.pool.query('select status, attempts from jobs where id = $1', [dead])).rows[0]).toEqual({
      status: 'pending',
      attempts: 0,
    });
    expect((await cli('jobs', 'cancel', pending)).code).toBe(0);
    expect((await db.pool.query('select status from jobs where id = $1', [pending])).rows[0].status).toBe('cancelled');
    const again = await cli('jobs', 'cancel', pending);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('cancelled');
  });

  it('jobs list, show and retry say held: disabled for a job of an endpoint disabled through the API', async () => {
    await db.pool.query(
      `insert into endpoints (name, url, topics, secret, enabled, owner) values ('off', 'http://127.0.0.1:9/off', '{a.*}', 'v1:x', false, 'cli:tester')`,
    );
    const waiting = (await db.pool.query(`insert into jobs (type, payload, endpoint) values ('webhook.deliver', '{}', 'off') returning id`))
      .rows[0].id;
    const dead = await deadJob('a.b', 'off');
    const held = { reason: 'disabled', circuit: 'closed', since: null, next_probe_at: null };
    try {
      expect(lines((await cli('jobs', 'list', '--status', 'pending')).stdout)).toEqual([expect.objectContaining({ id: waiting, held })]);
      expect(JSON.parse((await cli('jobs', 'show', waiting)).stdout)).toMatchObject({ held });
      expect(JSON.parse((await cli('jobs', 'retry', dead)).stdout)).toMatchObject({ status: 'pending', held });
    } finally {
      await db.pool.query(`delete from endpoints where name = 'off'`);
    }
  });

  it('jobs redrive prints the count as JSON; --dry-run changes nothing; --status is optional (dead is the only one)', async () => {
    await deadJob('a.b');
    await deadJob('a.b');
    await deadJob('c.d');
    const dry = await cli('jobs', 'redrive', '--status', 'dead', '--topic', 'a.b', '--dry-run');
    expect(JSON.parse(dry.stdout)).toEqual({ count: 2, dry_run: true });
    expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'dead'`)).rows[0].n).toBe(3);
    const real = await cli('jobs', 'redrive', '--since', '1h');
    expect(real.stdout).toBe('{"count":3}\n');
    expect((await db.pool.query(`select count(*)::int as n from jobs where status = 'pending'`)).rows[0].n).toBe(3);
    expect((await cli('jobs', 'redrive', '--status', 'completed')).code).toBe(2);
    expect((await cli('jobs', 'redrive', '--status', 'dead', '--since', 'yesterday')).code).toBe(2);
  });

  it('alerts prints recent dead letters; --follow passes new ones on and --since replays', async () => {
    const ins = (job: string) =>
      db.pool.query(
        `with a as (insert into audit_log (action, actor, target_type, target_id, details) values ('webhook.dead_letter', 'system', 'job', $1, $2) returning id)
         select pg_notify('public.acw_alerts', id::text), id from a`,
        [job, { job_id: job, endpoint: 'default' }],
      );
    const first = (await ins('11111111-1111-4111-8111-111111111111')).rows[0].id;
    const recent = lines((await cli('alerts')).stdout);
    expect(recent.map((a) => a.id)).toEqual([Number(first)]);
    const p = startCliInProcess(['alerts', '--follow', '--since', '0'], { ...process.env, DATABASE_URL: db.url });
    procs.push(p);
    await p.waitForLine(/11111111/);
    await ins('22222222-2222-4222-8222-222222222222');
    await p.waitForLine(/22222222/, 5_000);
    expect(await p.stop()).toBe(0);
    expect(p.lines.length).toBeGreaterThanOrEqual(2);
  });

  it('alerts --follow alone starts like tail -f: the last 10, then each new one; --since ID replays from there', async () => {
    const ins = (n: number) =>
      db.pool.query(
        `with a as (insert into audit_log (action, actor, target_type, target_id, details) values ('webhook.dead_letter', 'system', 'job', 'j', $1) returning id)
         select pg_notify('public.acw_alerts', id::text), id from a`,
        [{ n }],
      );
    const ids: number[] = [];
    for (let n = 1; n <= 12; n++) ids.push(Number((await ins(n)).rows[0].id));
    const p = startCliInProcess(['alerts', '--follow'], { ...process.env, DATABASE_URL: db.url });
    procs.push(p);
    await p.waitForLine(/"n":12/);
    await ins(13);
    await p.waitForLine(/"n":13/);
    // Oldest first, so alert 3 was the first line: nothing older came before it.
    expect(printed(p)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    expect(await p.stop()).toBe(0);

    const replay = startCliInProcess(['alerts', '--follow', '--since', String(ids[0])], { ...process.env, DATABASE_URL: db.url });
    procs.push(replay);
    await replay.waitForLine(/"n":13/);
    expect(printed(replay)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    expect(await replay.stop()).toBe(0);
  });
});
