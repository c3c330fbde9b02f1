import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify } from '../../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The worked example of docs/client.md §2, run for real: the event exists if and only if the commit happens.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`create table workspaces (id int primary key, sync_state text not null default 'ok', sync_error text)`);
  await db.pool.query(`insert into workspaces (id) values (42), (43)`);
});
afterAll(async () => {
  await db.drop();
});

async function markSyncFailed(
  workspaceId: number,
  reason: string,
  opts: { failBeforeCommit?: boolean; beforeCommit?: () => Promise<void> } = {},
): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`UPDATE workspaces SET sync_state = 'failed', sync_error = $2 WHERE id = $1`, [workspaceId, reason]);
    const eventId = await notify(client, 'workspace.sync_failed', { workspace_id: workspaceId, reason });
    await opts.beforeCommit?.();
    if (opts.failBeforeCommit) throw new Error('crash before commit');
    await client.query('COMMIT');
    return eventId;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}

async function eventsFor(workspaceId: number): Promise<Array<{ id: string; topic: string }>> {
  const res = await db.pool.query<{ id: string; topic: string }>(`select id, topic from events where (data->>'workspace_id')::int = $1`, [
    workspaceId,
  ]);
  return res.rows;
}

describe('the outbox example from docs/client.md', () => {
  it('writes the event with the update, and wakes the dispatcher only at commit', async () => {
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    const wakes: string[] = [];
    listener.on('notification', (n) => wakes.push(n.channel));
    await listener.query(`listen "public.acw_events"`);
    try {
      const eventId = await markSyncFailed(42, 'timeout', {
        beforeCommit: async () => {
          await listener.query('select 1'); // a round trip: anything already sent has arrived
          expect(wakes).toEqual([]);
          expect(await eventsFor(42)).toEqual([]); // invisible to everyone else until the commit
        },
      });
      expect(await eventsFor(42)).toEqual([{ id: eventId, topic: 'workspace.sync_failed' }]);
      const ws = await db.pool.query(`select sync_state from workspaces where id = 42`);
      expect(ws.rows[0]).toEqual({ sync_state: 'failed' });
      await expect.poll(() => wakes.length).toBeGreaterThan(0);
    } finally {
      await listener.end();
    }
  });

  it('leaves neither the update nor the event when the transaction rolls back', async () => {
    await expect(markSyncFailed(43, 'timeout', { failBeforeCommit: true })).rejects.toThrow('crash before commit');
    expect(await eventsFor(43)).toEqual([]);
    const ws = await db.pool.query(`select sync_state from workspaces where id = 43`);
    expect(ws.rows[0]).toEqual({ sync_state: 'ok' });
  });
});
