// A kill -9 between an alert and its sink's delivery (docs/operations.md#alert-sinks): the real
// bin serves, a customer delivery goes dead, and the process is killed while its sink's delivery of
// that dead letter is on the wire. The sink's job was written with the alert, so the next process
// delivers it: same alert, same delivery id. Runs the built package (npm test builds first).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/queue/transitions.js';
import { verifyWebhook } from '../../src/verify.js';
import { WEBHOOK_JOB, buildBody } from '../../src/webhook/job.js';
import { BIN } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const SECRET = 'kill-sink-secret-0123456789';

let db: TestDatabase;
let dir: string;
const procs: Proc[] = [];
const receivers: Receiver[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'acw-sink-kill-'));
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop('SIGKILL')));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('alert sinks and a killed process', () => {
  it('kill -9 while the sink delivery of an alert is on the wire: the next process delivers it, nothing lost', async () => {
    const lost = await startReceiver(() => ({ status: 400, body: 'unknown order' }));
    // The first request hangs until the process that sent it is gone; later ones are answered.
    let answered = 0;
    const sink = await startReceiver((req) => (req === sink.requests[0] ? { hang: true } : (answered++, { status: 200 })));
    receivers.push(lost, sink);
    const cfg = join(dir, 'acw.yaml');
    writeFileSync(
      cfg,
      [
        `database: { url: "${db.url}", migrate: false }`,
        'server: { listen: "127.0.0.1:0" }',
        'jobs:',
        '  retry: { base: 50ms, max: 200ms }',
        '  job_reaper: { interval: 200ms, lease_timeout: 2s }',
        'notify:',
        '  webhook:',
        `    endpoints: [{ name: lost, url: "${lost.url}/hook", secret: lost-secret, topics: ["*"] }]`,
        'alerts:',
        `  sinks: [{ name: ops, url: "${sink.url}/alerts", secret: "${SECRET}" }]`,
        '',
      ].join('\n'),
    );
    const env = { DATABASE_URL: '', ACW_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') };
    const a = startProc(process.execPath, [BIN, 'serve', '-c', cfg], env);
    procs.push(a);
    await a.waitForLine(/service\.listening/, 60_000);

    const body = buildBody({ id: crypto.randomUUID(), topic: 'order.paid', occurredAt: new Date(), data: {} });
    const [jobId] = await enqueueJobs(
      db.pool,
      [{ type: WEBHOOK_JOB, payload: { topic: 'order.paid', body }, maxAttempts: 3, endpoint: 'lost' }],
      'public.acw_jobs',
    );
    const [first] = await sink.waitForRequests(1, 60_000);
    await a.stop('SIGKILL');

    // The alert and its sink's job are both there; the job is still leased by the dead process.
    const alert = (await db.pool.query(`select id from audit_log where action = 'webhook.dead_letter' and target_id = $1`, [jobId])).rows;
    expect(alert).toHaveLength(1);
    const sinkJobs = await db.pool.query(`select id, status from jobs where endpoint = 'sink:ops'`);
    expect(sinkJobs.rows).toEqual([{ id: first!.headers['x-acw-event-id'], status: 'running' }]);

    const b = startProc(process.execPath, [BIN, 'serve', '-c', cfg], env);
    procs.push(b);
    await b.waitForLine(/service\.listening/, 60_000);
    const [, again] = await sink.waitForRequests(2, 60_000);
    await waitFor(
      async () => (await db.pool.query(`select status from jobs where endpoint = 'sink:ops'`)).rows[0]?.status === 'completed',
      60_000,
    );

    // The same delivery of the same alert, signed; one answered, and nothing else sent.
    expect(again!.headers['x-acw-event-id']).toBe(first!.headers['x-acw-event-id']);
    expect(again!.body.equals(first!.body)).toBe(true);
    expect(JSON.parse(again!.body.toString('utf8'))).toMatchObject({
      alert_id: Number(alert[0].id),
      kind: 'webhook.dead_letter',
      job_id: jobId,
    });
    expect(verifyWebhook({ secret: SECRET, headers: again!.headers, body: again!.body })).toBe(true);
    expect(answered).toBe(1);
    expect(sink.requests).toHaveLength(2);
  }, 180_000);
});
