import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALERT_ACTIONS } from '../../src/admin/alerts.js';
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

describe('the alert index', () => {
  it('audit_log_alerts_idx covers exactly ALERT_ACTIONS (a new alert kind changes both, in a migration)', async () => {
    expect((await indexedActions()).toSorted()).toEqual([...ALERT_ACTIONS].toSorted());
  });
});
