import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { raiseEndpointAlert, type EndpointAlertAction } from '../../src/endpoint-state/alerts.js';
import { deadLetterHook } from '../../src/webhook/dead-letter.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { jsonLines, runCliInProcess, startCliInProcess, type CliInProcess, type CliResult } from '../helpers/cli.js';

const CHANNEL = 'public.acw_alerts';

let db: TestDatabase;
const procs: CliInProcess[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query('truncate notifications, audit_log, users cascade');
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop()));
});

async function cli(...args: string[]): Promise<CliResult> {
  return runCliInProcess(args, { ...process.env, DATABASE_URL: db.url });
}
const lines = jsonLines;
/** What a follower printed: its stdout JSON lines (stderr lines are not JSON). */
const printed = (p: CliInProcess) => p.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

const raise = (action: EndpointAlertAction, endpoint = 'crm') => raiseEndpointAlert(db.pool, CHANNEL, { action, endpoint, details: {} });

/** A dead letter through the queue's own hook (the SQL every path to dead runs), in a transaction as the queue does. */
async function deadLetter(): Promise<string> {
  const id = randomUUID();
  const c = await db.pool.connect();
  try {
    await c.query('begin');
    await deadLetterHook(CHANNEL)(c, [
      {
        id,
        type: 'webhook.deliver',
        payload: { topic: 'a.b' },
        attempts: 6,
        maxAttempts: 6,
        lastError: 'HTTP 500',
        eventId: randomUUID(),
        endpoint: 'crm',
        reason: 'max_attempts',
      },
    ]);
    await c.query('commit');
  } finally {
    c.release();
  }
  return id;
}

describe('acw-webhooks alerts --action', () => {
  it('lists only the actions asked for, repeated or comma-separated; every line carries its action', async () => {
    const opened = await raise('endpoint.circuit_opened');
    const job = await deadLetter();
    const closed = await raise('endpoint.circuit_closed');
    const expired = await raise('endpoint.expired');

    const all = lines((await cli('alerts')).stdout);
    expect(all.map((a) => a.action)).toEqual([
      'endpoint.circuit_opened',
      'webhook.dead_letter',
      'endpoint.circuit_closed',
      'endpoint.expired',
    ]);
    expect(all[1]).toMatchObject({ job_id: job, endpoint: 'crm', reason: 'max_attempts' });

    const commas = await cli('alerts', '--action', 'endpoint.circuit_opened,endpoint.circuit_closed');
    expect(commas.code).toBe(0);
    expect(lines(commas.stdout).map((a) => [a.id, a.action])).toEqual([
      [opened, 'endpoint.circuit_opened'],
      [closed, 'endpoint.circuit_closed'],
    ]);
    const repeated = lines((await cli('alerts', '--action', 'endpoint.expired', '--action', 'webhook.dead_letter')).stdout);
    expect(repeated.map((a) => a.action)).toEqual(['webhook.dead_letter', 'endpoint.expired']);
    expect(repeated[1]!.id).toBe(expired);
    // With --since and --limit: the first after the id, of those actions.
    const after = lines(
      (await cli('alerts', '--action', 'endpoint.circuit_closed,endpoint.expired', '--since', String(opened), '--limit', '1')).stdout,
    );
    expect(after.map((a) => a.id)).toEqual([closed]);
  });

  it('an unknown action exits 2 naming --action and prints nothing, with or without --follow', async () => {
    await raise('endpoint.circuit_opened');
    for (const args of [
      ['--action', 'endpoint.exploded'],
      ['--action', 'endpoint.circuit_opened,nope'],
      ['--action', 'endpoint.circuit_opened', '--action', 'job.retry'],
      ['--action', ''],
      ['--follow', '--action', 'nope'],
    ]) {
      const r = await cli('alerts', ...args);
      expect({ args, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
        args,
        code: 2,
        stdout: '',
        stderr: expect.stringMatching(/^--action: (unknown alert action|expected alert actions).*endpoint\.circuit_opened/),
      });
    }
  });

  it('--follow --action prints the backlog and new alerts of those actions only', async () => {
    const old = await raise('endpoint.circuit_opened', 'old');
    await raise('endpoint.expired');
    const p = startCliInProcess(['alerts', '--follow', '--action', 'endpoint.circuit_opened', '--action', 'webhook.dead_letter'], {
      ...process.env,
      DATABASE_URL: db.url,
    });
    procs.push(p);
    await p.waitForLine(/"endpoint":"old"/);
    await raise('endpoint.circuit_closed');
    const job = await deadLetter();
    await raise('endpoint.expired');
    const last = await raise('endpoint.circuit_opened', 'new');
    await p.waitForLine(/"endpoint":"new"/);
    // Oldest first, and nothing between the dead letter and the last open: the others were filtered out.
    expect(printed(p).map((a) => [a.action, a.job_id ?? a.endpoint])).toEqual([
      ['endpoint.circuit_opened', 'old'],
      ['webhook.dead_letter', job],
      ['endpoint.circuit_opened', 'new'],
    ]);
    expect(printed(p).map((a) => a.id)).toEqual([old, expect.any(Number), last]);
    expect(await p.stop()).toBe(0);
  });

  it('--ack ID and --ack-all acknowledge; --state lists open or resolved; a condition that lasts stays open', async () => {
    const opened = await raise('endpoint.circuit_opened');
    await deadLetter();
    const expired = await raise('endpoint.expired');
    const one = await cli('alerts', '--ack', String(expired));
    expect(one.code).toBe(0);
    expect(lines(one.stdout)).toEqual([
      expect.objectContaining({ id: expired, state: 'resolved', acknowledged_by: expect.stringMatching(/^cli:/) }),
    ]);
    const all = await cli('alerts', '--ack-all');
    expect(lines(all.stdout)).toEqual([{ acknowledged: 2, up_to: expired }]);
    // Acknowledged, the circuit alert stays open: its circuit has not closed.
    const open = await cli('alerts', '--state', 'open');
    expect(lines(open.stdout).map((a) => [a.id, a.state, typeof a.acknowledged_at])).toEqual([[opened, 'open', 'string']]);
    expect(lines((await cli('alerts', '--state', 'resolved')).stdout)).toHaveLength(2);
    expect(await cli('alerts', '--ack', 'x')).toMatchObject({ code: 2, stderr: expect.stringMatching(/^--ack: expected an alert id/) });
    expect(await cli('alerts', '--state', 'shut')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^--state: expected open or resolved/),
    });
    expect((await cli('alerts', '--ack', '999999')).code).not.toBe(0);
  });
});
