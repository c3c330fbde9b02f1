import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJob } from '../../src/admin/jobs.js';
import { newEventId } from '../../src/notify/event-id.js';
import { dataJson } from '../../src/notify/input.js';
import { claimJobs, enqueueJobs, insertWithJobs } from '../../src/queue/transitions.js';
import { WEBHOOK_JOB, buildBody, eventBody, jobEventOf, webhookJobId } from '../../src/webhook/job.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// A webhook job of an event in event_log carries no body: its claim reads the event and the worker
// makes the body from it (eventBody of the claim's JobEvent). Three other makers must agree with
// that one byte for byte:
// - a job the notify hands to its own process's pool without a claim (src/notify/fan-out.ts) makes
//   its JobEvent in memory (jobEventOf) from the data as the request gave it, with its keys in
//   another order, and the transaction's now() as epoch milliseconds;
// - the outbox pump does the same from the event row as node-pg read it;
// - job detail (getJob) shows the body the job sends;
// and the body an older job carries (buildBody, stored in its payload) is what it was before.
// Fuzzed over topics, data and timestamps against real PostgreSQL: now() is set per case by a now()
// that shadows pg_catalog's on the search path, so the statements run exactly as written, at a
// chosen microsecond.

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
  /** The body made from the claim's read of the stored event (what every retry sends). */
  claimed: string;
  /** jobEventOf the data as given and now() as the transaction path reads it (epoch milliseconds, floored). */
  memory: string;
  /** jobEventOf the event row as node-pg reads it (the outbox pump). */
  pumped: string;
  /** The payload's body as job detail shows it. */
  shown: string;
  /** buildBody of the event, stored in an older job's payload and read back. */
  stored: string;
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
    const job = webhookJobId(id, 'ep');
    const written = await insertWithJobs(
      client,
      {
        name: 'acw_test_body_builders',
        first: {
          text: `insert into event_log (id, topic, data, principal, dispatched_at, created_at) values ($1, $2, $3::jsonb, $4, now(), now()) returning id`,
          values: [id, t.topic, json, 'test'],
        },
        ids: [job],
        endpoints: ['ep'],
        type: WEBHOOK_JOB,
        maxAttempts: 1,
        eventId: id,
        topic: t.topic,
      },
      CH,
    );
    expect(written).toBe(true);
    const [claimed] = await claimJobs(client, { workerId: 'w', leaseMs: 60_000, limit: 1 });
    expect(claimed).toMatchObject({ id: job, payload: { topic: t.topic } });
    expect(claimed!.payload).not.toHaveProperty('body');
    // What withTransaction's readNow reads, and the event row as node-pg makes of it.
    const now = await client.query<{ now_ms: number }>(`select floor(extract(epoch from now()) * 1000)::float8 as now_ms`);
    const row = await client.query<{ data: unknown; created_at: Date }>(`select data, created_at from event_log where id = $1`, [id]);
    const { data: readData, created_at: createdAt } = row.rows[0]!;
    const shown = (await getJob(client, job))!.payload as { body: string };
    const olderJob = webhookJobId(id, 'older');
    const older = buildBody({ id, topic: t.topic, occurredAt: createdAt, data: readData });
    await enqueueJobs(
      client,
      [{ id: olderJob, type: WEBHOOK_JOB, payload: { topic: t.topic, body: older }, maxAttempts: 1, eventId: id, endpoint: 'older' }],
      CH,
    );
    const stored = await client.query<{ body: string }>(`select payload->>'body' as body from jobs where id = $1`, [olderJob]);
    return {
      claimed: eventBody(id, t.topic, claimed!.event!),
      memory: eventBody(id, t.topic, jobEventOf(t.data, new Date(now.rows[0]!.now_ms))),
      pumped: eventBody(id, t.topic, jobEventOf(readData, createdAt)),
      shown: shown.body,
      stored: stored.rows[0]!.body,
    };
  } finally {
    await client.query('rollback');
  }
}

describe('the makers of the delivery body', () => {
  it('the clock stands where the case sets it, in the statement that writes the event too', async () => {
    const client = await db.pool.connect();
    try {
      const b = await build(client, { topic: 'clock.check', data: 1, us: 1_767_225_600_123_999n, tz: 'Asia/Kathmandu' });
      expect(b.claimed).toContain('"occurred_at":"2026-01-01T00:00:00.123Z"');
    } finally {
      client.release();
    }
  });

  it("send the stored event's keys in jsonb's order, whatever order the request gave them in", async () => {
    const client = await db.pool.connect();
    try {
      const order = { seq: 1, order_id: 'ord_1', amount_cents: 2500, '10': 'x', '9': 'y', customer: { id: 'c', email: 'e' }, items: 2 };
      const b = await build(client, { topic: 'order.paid', data: order, us: 1_767_225_600_000_000n, tz: 'UTC' });
      expect(b.claimed).toContain(
        '"data":{"9":"y","10":"x","seq":1,"items":2,"customer":{"id":"c","email":"e"},"order_id":"ord_1","amount_cents":2500}}',
      );
      expect(b.memory).toBe(b.claimed);
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
          expect(b.memory).toBe(b.claimed);
          expect(b.pumped).toBe(b.claimed);
          expect(b.shown).toBe(b.claimed);
          expect(b.stored).toBe(b.claimed);
        }),
        { seed: SEED, numRuns: RUNS },
      );
    } finally {
      client.release();
    }
  });
});
