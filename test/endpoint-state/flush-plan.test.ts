// The circuit breaker's flush runs at every outcome batch of every process. Given arrays,
// PostgreSQL judged each custom plan (sized to the arrays) cheaper than the generic one and planned
// the statement anew at every execution: milliseconds of planning for a fraction of one of work.
// It runs on its generic plan: after more executions than the five custom plans PostgreSQL tries
// first, this connection has planned it once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureStateRows, writeOutcomes } from '../../src/endpoint-state/circuit-rows.js';
import { createPool } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testConfig } from '../helpers/service.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
}, 30_000);
afterAll(async () => {
  await db?.drop();
});

describe('the circuit flush', () => {
  it('runs on one generic plan, not a custom plan per execution, and still opens a circuit', async () => {
    // One connection, so pg_prepared_statements (per session) is the flush's own.
    const pool = createPool({ url: db.url, size: 1, schema: 'public' });
    try {
      const circuit = testConfig(db).notify.webhook.circuit;
      await ensureStateRows(pool, ['a', 'b']);
      const fail = { ok: 0, bad: 1, trailing: 1, err: 'HTTP 503', probeJob: null, probeOk: null, permanent: 0, codes: [] };
      const runs = 12;
      for (let i = 0; i < runs; i++) {
        await writeOutcomes(
          pool,
          i % 2
            ? [['a', fail]]
            : [
                ['a', fail],
                ['b', fail],
              ],
          circuit,
          'nobody_listens',
        );
      }
      const plans = await pool.query<{ generic_plans: string; custom_plans: string }>(
        `select generic_plans, custom_plans from pg_prepared_statements where name = 'acw_endpoint_flush'`,
      );
      expect(plans.rows).toEqual([{ generic_plans: String(runs), custom_plans: '0' }]);
      // The generic plan does the flush's work: `a` failed 12 times in a row, past the threshold.
      const a = await pool.query<{ circuit: string }>(`select circuit from endpoint_state where endpoint = 'a'`);
      expect(circuit.failure_threshold).toBeLessThanOrEqual(runs);
      expect(a.rows[0]?.circuit).toBe('open');
    } finally {
      await pool.end();
    }
  });
});
