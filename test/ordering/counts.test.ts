import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeOutcomes } from '../../src/endpoint-state/circuit-rows.js';
import { readEndpointStates } from '../../src/endpoint-state/health.js';
import { queueCounts } from '../../src/history/stats.js';
import { insertKeyedJobs } from '../../src/queue/transitions.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testConfig } from '../helpers/service.js';

// Jobs behind their ordering key's head (status 'behind') are waiting: the endpoint's held_jobs,
// the circuit's held_deliveries and /v1/stats' pending count them, read on job_queue_behind_idx.

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
}, 30_000);
afterAll(async () => {
  await db?.drop();
});

/** One key of `n` jobs for `endpoint`: one pending head, n - 1 behind it. */
async function keyOf(endpoint: string, key: string, n: number): Promise<void> {
  const jobs = Array.from({ length: n }, () => ({
    id: randomUUID(),
    type: 'webhook.deliver',
    payload: {},
    maxAttempts: 3,
    endpoint,
    orderingKey: key,
  }));
  await insertKeyedJobs(db.pool, jobs, 'nobody_listens');
}

describe('jobs behind a head are counted as waiting', () => {
  it("held_jobs of a held endpoint, /v1/stats' pending, and held_deliveries when the circuit closes", async () => {
    await keyOf('down', 'k1', 4);
    await keyOf('down', 'k2', 2);
    await keyOf('up', 'k1', 3);
    const probe = randomUUID();
    await db.pool.query(
      `insert into endpoint_state (endpoint, circuit, circuit_since, opened_at, probe_job_id, open_alert_id, alert_opened_at)
       values ('down', 'half_open', now(), now() - interval '1 minute', $1, 1, now() - interval '1 minute')`,
      [probe],
    );

    const states = await readEndpointStates(db.pool, [
      { name: 'down', enabled: true },
      { name: 'up', enabled: true },
    ]);
    // 2 pending heads + 4 behind; `up` delivers, so holds nothing.
    expect(states.get('down')?.held_jobs).toBe(6);
    expect(states.get('up')?.held_jobs).toBe(0);
    // Capped as before: at most `cap`, heads and the jobs behind them together.
    expect((await readEndpointStates(db.pool, [{ name: 'down', enabled: true }], 3)).get('down')?.held_jobs).toBe(3);

    // 3 heads + 6 behind.
    expect((await queueCounts(db.pool)).pending).toBe(9);

    // The probe succeeds: the circuit closes, and the deliveries it held include those behind heads.
    const circuit = testConfig(db).notify.webhook.circuit;
    const delta = { ok: 1, bad: 0, trailing: 0, err: null, probeJob: probe, probeOk: true, permanent: 0, codes: [] };
    const flushed = await writeOutcomes(db.pool, [['down', delta]], circuit, 'nobody_listens');
    expect(flushed).toMatchObject([{ endpoint: 'down', old_circuit: 'half_open', circuit: 'closed' }]);
    const held = await db.pool.query(`select alert_held from endpoint_state where endpoint = 'down'`);
    expect(held.rows[0].alert_held).toBe(6);
  });

  it('the jobs behind heads are counted on job_queue_behind_idx, not by a scan of job_queue', async () => {
    const client = await db.pool.connect();
    try {
      // On a table this small a scan is cheapest whatever the indexes: forbid it, and see an index is there to use.
      await client.query('begin');
      await client.query('set local enable_seqscan = off');
      for (const q of [
        `select count(*) from (select 1 from job_queue where status = 'behind' limit 10001) b`,
        `select count(*) from (select 1 from job_queue j where j.status = 'behind' and j.endpoint = 'down' limit 100000) b`,
      ]) {
        const plan = (await client.query(`explain ${q}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan).toContain('job_queue_behind_idx');
        expect(plan).not.toContain('Seq Scan');
      }
      await client.query('rollback');
    } finally {
      client.release();
    }
  });
});
