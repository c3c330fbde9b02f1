// COPY FROM STDIN as the batch notify and the fan-out use it (src/db/copy.ts), against real
// PostgreSQL: rows in order between other statements, a failing row that leaves the
// connection usable, data larger than one CopyData message, and the text format's escapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { copyField, copyRows, copyTextArray, timestampField } from '../../src/db/copy.js';
import { insertJobs } from '../../src/queue/transitions.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let client: pg.PoolClient;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`create table copied (n int primary key, t text, j jsonb, a text[], ts timestamptz)`);
  client = await db.pool.connect();
});
afterAll(async () => {
  client.release();
  await db.drop();
});

const line = (n: number, t: string | null, j: unknown, a: string[], ts: string | null = null) =>
  `${n}\t${copyField(t)}\t${copyField(JSON.stringify(j))}\t${copyTextArray(a)}\t${copyField(ts)}\n`;

describe('copyRows', () => {
  it('writes the rows in one statement between others on the connection, and answers their number', async () => {
    await client.query('begin');
    await client.query(`insert into copied (n) values (0)`);
    expect(await copyRows(client, 'copy copied (n, t, j, a, ts) from stdin', line(1, 'a', { x: 1 }, ['p']) + line(2, null, null, []))).toBe(
      2,
    );
    expect((await client.query<{ n: number }>(`select count(*)::int as n from copied`)).rows[0]!.n).toBe(3);
    await client.query('rollback');
  });

  it('runs the statements after the COPY in the same round trip', async () => {
    await client.query('begin');
    await copyRows(client, `copy copied (n, t, j, a, ts) from stdin; insert into copied (n, t) values (99, 'after')`, line(1, 'a', 1, []));
    const r = await client.query(`select n, t from copied order by n`);
    expect(r.rows).toEqual([
      { n: 1, t: 'a' },
      { n: 99, t: 'after' },
    ]);
    await client.query('rollback');
  });

  it('keeps text, JSON and arrays of any characters as they were', async () => {
    const texts = ['tab\there', 'back\\slash', '\\N', 'line\nbreak\r\n', '"quoted" {a,b}', 'é 🎉 \u2028', '\\\\t'];
    const json = { s: texts, nested: { q: '"\\u0041"' } };
    const arrays = [['a b', 'c,d', '{e}', '"f"', 'g\\h', 'NULL', '']];
    let text = '';
    texts.forEach((t, i) => (text += line(i, t, json, arrays[0]!)));
    await client.query('begin');
    expect(await copyRows(client, 'copy copied (n, t, j, a, ts) from stdin', text)).toBe(texts.length);
    const r = await client.query<{ t: string; j: unknown; a: string[] }>(`select t, j, a from copied order by n`);
    expect(r.rows).toEqual(texts.map((t) => ({ t, j: json, a: arrays[0] })));
    await client.query('rollback');
  });

  it('sends more than one CopyData message for data above a mebibyte', async () => {
    const big = 'x'.repeat(300_000);
    let text = '';
    for (let i = 0; i < 10; i++) text += line(i, big, { i }, []);
    await client.query('begin');
    expect(await copyRows(client, 'copy copied (n, t, j, a, ts) from stdin', text)).toBe(10);
    const r = await client.query(`select count(*)::int as n, sum(length(t))::int as chars from copied`);
    expect(r.rows[0]).toEqual({ n: 10, chars: 3_000_000 });
    await client.query('rollback');
  });

  it('rejects with the row error (the unique violation a caller tells apart), and the connection serves the next statement', async () => {
    await client.query('begin');
    const failing = copyRows(
      client,
      'copy copied (n, t, j, a, ts) from stdin',
      line(1, 'a', 1, []) + line(1, 'b', 2, []) + line(3, 'c', 3, []),
    );
    await expect(failing).rejects.toMatchObject({ code: '23505', constraint: 'copied_pkey' });
    await expect(client.query('select 1')).rejects.toMatchObject({ code: '25P02' }); // in the aborted transaction
    await client.query('rollback');
    expect((await client.query(`select count(*)::int as n from copied`)).rows[0]).toEqual({ n: 0 });
    // A large COPY that fails on its first row while its data is still going out.
    await client.query('begin');
    let text = line(7, 'a', 1, []) + line(7, 'b', 1, []);
    for (let i = 10; i < 5000; i++) text += line(i, 'y'.repeat(1000), i, []);
    await expect(copyRows(client, 'copy copied (n, t, j, a, ts) from stdin', text)).rejects.toMatchObject({ code: '23505' });
    await client.query('rollback');
    expect((await client.query(`select 2 as two`)).rows).toEqual([{ two: 2 }]);
  });

  it('rejects a statement that fails before the copy begins; the data sent behind it is ignored', async () => {
    const failing = copyRows(client, 'copy no_such_table (n) from stdin', '1\n2\n');
    await expect(failing).rejects.toMatchObject({ code: '42P01' });
    expect((await client.query(`select 3 as three`)).rows).toEqual([{ three: 3 }]);
  });
});

/** A job id of the test's own, one per number. */
const id = (k: number) => `00000000-0000-4000-8000-${String(k).padStart(12, '0')}`;

describe('insertJobs with copy', () => {
  it('copies the plain jobs and inserts the others, answering every id in the order given', async () => {
    const plain = Array.from({ length: 60 }, (_, k) => ({
      id: id(k),
      type: 't',
      payload: { k, s: 'a\tb\\c' },
      maxAttempts: 3,
      endpoint: 'e',
    }));
    // Later, and with no id of its own: the database picks it.
    const delayed = { type: 't', payload: { later: true }, maxAttempts: 3, delayMs: 60_000 };
    await client.query('begin');
    const sent: string[] = [];
    client.on('notification', (n) => sent.push(n.channel));
    await client.query('listen test_jobs');
    const res = await insertJobs(client, [...plain.slice(0, 30), delayed, ...plain.slice(30)], 'test_jobs', undefined, { copy: true });
    expect(res.ids.slice(0, 30)).toEqual(plain.slice(0, 30).map((j) => j.id));
    expect(res.ids.slice(31)).toEqual(plain.slice(30).map((j) => j.id));
    const rows = await client.query<{ id: string; payload: unknown; due_later: boolean }>(
      `select id, payload, run_at > now() as due_later from job_queue order by payload->>'k' nulls last`,
    );
    expect(rows.rows).toHaveLength(61);
    expect(rows.rows.at(-1)).toEqual({ id: res.ids[30], payload: { later: true }, due_later: true });
    expect(rows.rows[0]).toEqual({ id: id(0), payload: { k: 0, s: 'a\tb\\c' }, due_later: false });
    await client.query('commit');
    await client.query('unlisten test_jobs; truncate job_queue');
    expect(sent).toContain('test_jobs');
  });
});

describe('timestampField', () => {
  it('is the transaction now() to the microsecond, from epoch milliseconds with their fraction', async () => {
    await client.query('begin');
    const r = await client.query<{ us: string }>(`select (extract(epoch from now()) * 1000000)::int8 as us`);
    const ms = Number(r.rows[0]!.us) / 1000;
    const same = await client.query<{ same: boolean }>(`select $1::timestamptz = now() as same`, [timestampField(ms)]);
    expect(same.rows[0]!.same).toBe(true);
    await client.query('rollback');
    expect(timestampField(Date.UTC(2026, 11, 3, 8, 9, 10) + 0.5)).toBe('2026-12-03T08:09:10.000500Z');
    expect(timestampField(Date.UTC(2026, 11, 3, 8, 9, 10) + 999.999)).toBe('2026-12-03T08:09:10.999999Z');
  });
});
