import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALERT_ACTIONS, listAlerts, readAlerts } from '../../src/admin/alerts.js';
import type { Queryable } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

/** The actions in the migrated index's predicate, as PostgreSQL prints it: `WHERE (action = ANY (ARRAY['a'::text, …]))`. */
async function indexedActions(): Promise<string[]> {
  const res = await db.pool.query<{ indexdef: string }>(
    `select indexdef from pg_indexes where schemaname = current_schema() and indexname = 'audit_log_alerts_idx'`,
  );
  expect(res.rows).toHaveLength(1);
  const def = res.rows[0]!.indexdef;
  const where = def.slice(def.indexOf(' WHERE '));
  expect(where).toMatch(/^ WHERE \(action = ANY \(ARRAY\[/);
  return [...where.matchAll(/'([^']*)'::text/g)].map((m) => m[1]!);
}

/** The plan of every statement `run` sends, with the same parameters (the index must serve the real SQL). */
async function plansOf(run: (q: Queryable) => Promise<unknown>): Promise<string[]> {
  const sent: Array<{ text: string; values: unknown[] }> = [];
  const recorder = {
    query: async (text: string, values: unknown[] = []) => {
      sent.push({ text, values });
      return db.pool.query(text, values);
    },
  } as unknown as Queryable;
  await run(recorder);
  const c = await db.pool.connect();
  try {
    // An empty table makes a sequential scan cheapest; without one the planner shows which index it can use.
    await c.query('set enable_seqscan = off');
    const plans: string[] = [];
    for (const s of sent) {
      const res = await c.query<{ 'QUERY PLAN': string }>(`explain ${s.text}`, s.values);
      plans.push(res.rows.map((r) => r['QUERY PLAN']).join('\n'));
    }
    return plans;
  } finally {
    c.release();
  }
}

describe('the alert index', () => {
  it('audit_log_alerts_idx covers exactly ALERT_ACTIONS (a new alert kind changes both, in a migration)', async () => {
    expect((await indexedActions()).toSorted()).toEqual([...ALERT_ACTIONS].toSorted());
  });

  it('the alert reads are planned on it, filtered by action or not', async () => {
    const plans = await plansOf(async (q) => {
      await listAlerts(q, {});
      await listAlerts(q, { action: ['endpoint.circuit_opened'], cursor: Buffer.from('100').toString('base64url') });
      await readAlerts(q, { sinceId: 5, action: 'webhook.dead_letter' });
      await readAlerts(q, { limit: 10 });
    });
    expect(plans).toHaveLength(4);
    for (const p of plans) expect(p).toContain('audit_log_alerts_idx');
  });
});
