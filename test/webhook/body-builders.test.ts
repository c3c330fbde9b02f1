import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEventId } from '../../src/notify/event-id.js';
import { dataJson } from '../../src/notify/input.js';
import { enqueueJobs, insertWithJobs } from '../../src/queue/transitions.js';
import { OCCURRED_AT_SQL, WEBHOOK_JOB, bodyAround, buildBody, webhookJobId } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// The delivery body has two builders that must agree byte for byte: buildBody in the process (the
// transaction path and the outbox pump, src/notify/fan-out.ts) and the one-statement notify, which
// finishes the body in SQL around the statement's now() (insertWithJobs with bodyAround and
// OCCURRED_AT_SQL, as src/notify/notify.ts calls it). Fuzzed over topics, data and timestamps
// against real PostgreSQL: now() is set per case by a now() that shadows pg_catalog's on the
// search path, so the SQL builder runs exactly as written, at a chosen microsecond.

/** The seed of this file's cases: fixed, so a failure replays; BODY_SEED picks another for a deeper local run. */
const SEED = Number(process.env['BODY_SEED'] ?? 25_0025);
const RUNS = Number(process.env['BODY_RUNS'] ?? 200);

const CH = 'public.acw_jobs';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`create schema acw_clock;
    create function acw_clock.now() returns timestamptz language sql stable as $$ select current_setting('acw_test.now')::timestamptz $$`);
});
afterAll(async () => db.drop());

/** Characters that serialise with escapes or as more than one UTF-16 unit (NUL and lone surrogates: jsonb refuses them, as notify does). */
const ODD = [
  '"',
  '\\',
  '/',
  '\n',
  '\r',
  '\t',
  '\b',
  '\f',
  '\u0001',
  '\u001f',
  '\u007f',
  '\u2028',
  '\u2029',
  '\ufeff',
  'é',
  'e\u0301',
  '\u{1f4a9}',
  '</script>',
];
const text = fc
  .array(fc.oneof(fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom(...ODD)), { maxLength: 5 })
  .map((parts) => parts.join('').replaceAll('\u0000', ''));
/** Numbers whose JSON is not their literal (1e21, -0) or that sit at a float's edges. */
const SPECIAL = [
  1e21,
  -1e21,
  1e-7,
  -0,
  0,
  5e-324,
  1.7976931348623157e308,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 63),
  123456789012345680000,
  0.1,
  1.5e300,
];
const number = fc.oneof(
  fc.constantFrom(...SPECIAL),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.maxSafeInteger(),
);
const { data } = fc.letrec<{ data: unknown }>((tie) => ({
  data: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, {}, []),
    number,
    text,
    fc.array(tie('data'), { maxLength: 4 }),
    fc.dictionary(text, tie('data'), { maxKeys: 4 }),
  ),
}));
/** As the events table allows them (its check constraint, isValidTopic). */
const topic = fc.stringMatching(/^[a-z0-9_]{1,12}(\.[a-z0-9_]{1,12}){0,4}$/);
/** Microseconds since the epoch, 1970 to 9999 (to_char and toISOString both write four-digit years). */
const micros = fc.bigInt(0n, 253_402_300_799_999_999n);
/** The statement's now() is written in UTC whatever the session's time zone. */
const timeZone = fc.constantFrom('UTC', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham', 'Europe/Paris');

/** A microsecond count as PostgreSQL reads it (ISO 8601, UTC, all six digits). */
function isoMicros(us: bigint): string {
  const ms = Number(us / 1000n);
  return `${new Date(ms).toISOString().slice(0, 19)}.${(us % 1_000_000n).toString().padStart(6, '0')}Z`;
}

interface Built {
  /** The body the one-statement notify stored (SQL builder). */
  sql: string;
  /** buildBody of the event, given now() as the transaction path reads it (epoch milliseconds, floored). */
  js: string;
  /** buildBody given now() as node-pg parses a timestamptz (the outbox pump reads created_at so). */
  jsParsed: string;
  /** The js body after a round trip through the jobs insert of the transaction path. */
  jsStored: string;
}

async function build(client: pg.PoolClient, t: { topic: string; data: unknown; us: bigint; tz: string }): Promise<Built> {
  await client.query('begin');
  try {
    await client.query(
      `select set_config('search_path', 'acw_clock, pg_catalog, public', true), set_config('acw_test.now', $1, true),
      set_config('timezone', $2, true)`,
      [isoMicros(t.us), t.tz],
    );
    const id = newEventId();
    const json = dataJson(t.data);
    const [bodyBefore, bodyAfter] = bodyAround({ id, topic: t.topic }, json);
    const sqlJob = webhookJobId(id, 'sql');
    const written = await insertWithJobs(
      client,
      {
        name: 'acw_test_body_builders',
        first: {
          text: `insert into event_log (id, topic, data, principal, dispatched_at) values ($1, $2, $3::jsonb, $4, now()) returning id`,
          values: [id, t.topic, json, 'test'],
        },
        ids: [sqlJob],
        endpoints: ['sql'],
        type: WEBHOOK_JOB,
        maxAttempts: 1,
        eventId: id,
        topic: t.topic,
        bodyBefore,
        bodyNowSql: OCCURRED_AT_SQL,
        bodyAfter,
      },
      CH,
    );
    expect(written).toBe(true);
    // What withTransaction's readNow reads, and what node-pg makes of the timestamp itself.
    const now = await client.query<{ now_ms: number; now: Date }>(
      `select floor(extract(epoch from now()) * 1000)::float8 as now_ms, now() as now`,
    );
    const { now_ms: nowMs, now: parsed } = now.rows[0]!;
    const js = buildBody({ id, topic: t.topic, occurredAt: new Date(nowMs), data: t.data });
    const jsParsed = buildBody({ id, topic: t.topic, occurredAt: parsed, data: t.data });
    const jsJob = webhookJobId(id, 'js');
    await enqueueJobs(
      client,
      [{ id: jsJob, type: WEBHOOK_JOB, payload: { topic: t.topic, body: js }, maxAttempts: 1, eventId: id, endpoint: 'js' }],
      CH,
    );
    const stored = await client.query<{ id: string; body: string }>(`select id, payload->>'body' as body from jobs where event_id = $1`, [
      id,
    ]);
    const bodyOf = (job: string) => stored.rows.find((r) => r.id === job)!.body;
    return { sql: bodyOf(sqlJob), js, jsParsed, jsStored: bodyOf(jsJob) };
  } finally {
    await client.query('rollback');
  }
}

describe('the two builders of the delivery body', () => {
  it('the clock stands where the case sets it, in the statement that builds the body too', async () => {
    const client = await db.pool.connect();
    try {
      const b = await build(client, { topic: 'clock.check', data: 1, us: 1_767_225_600_123_999n, tz: 'Asia/Kathmandu' });
      expect(b.sql).toContain('"occurred_at":"2026-01-01T00:00:00.123Z"');
    } finally {
      client.release();
    }
  });

  it('give the same bytes for fuzzed topics, data and sub-millisecond timestamps', async () => {
    const client = await db.pool.connect();
    try {
      await fc.assert(
        fc.asyncProperty(topic, data, micros, timeZone, async (t, d, us, tz) => {
          const b = await build(client, { topic: t, data: d, us, tz });
          expect(b.sql).toBe(b.js);
          expect(b.jsParsed).toBe(b.js);
          expect(b.jsStored).toBe(b.js);
        }),
        { seed: SEED, numRuns: RUNS },
      );
    } finally {
      client.release();
    }
  });
});
