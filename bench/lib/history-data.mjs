// Finished deliveries written straight into a database with set-based SQL, as a busy installation
// leaves them: each an event, its finished webhook.deliver job and its one attempt row, plus the
// per-minute counters and the dead-letter audit rows the service writes beside them. Used by the
// backlog scenario's template and the history scenario's (bench/README.md#history-at-volume), on
// both job layouts: the history layout (job_history, job_attempts: migration 0010) when the build
// has it, else the single `jobs` table of older builds, so a build snapshot of either can be run.

/** 'history' when the database has the history layout (job_queue, job_history, job_attempts), else 'jobs'. */
export async function layoutOf(db) {
  const r = await db.query(`select to_regclass('job_history') is not null as h`);
  return r.rows[0].h ? 'history' : 'jobs';
}

/** The history scenario's endpoints, topics, and one delivery in this many dead (bench/README.md#history-at-volume). */
export const HISTORY_ENDPOINTS = Array.from({ length: 20 }, (_, e) => `e${String(e).padStart(3, '0')}`);
export const HISTORY_TOPICS = ['order.paid', 'order.refunded', 'customer.created', 'invoice.issued'];
export const HISTORY_DEAD_EVERY = 50;

// Session functions (pg_temp): nothing of the loader stays in the database.
const TEMP_FUNCTIONS = [
  // A version 7 UUID for instant t, as acw_uuid_v7 (migration 0010) makes from the clock.
  `create or replace function pg_temp.bench_v7(t timestamptz) returns uuid language sql volatile as $$
    select encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'hex')::uuid
      from (select overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from t) * 1000)::bigint) from 3)
                           from 1 for 6) as b) x $$`,
  // A version 8 UUID led by the event's 48 bits of milliseconds, the shape of webhookJobId
  // (src/webhook/job.ts); the rest is a SHA-256 of event and endpoint, not its SHA-1 with namespace.
  `create or replace function pg_temp.bench_v8(eid uuid, endpoint text) returns uuid language sql immutable as $$
    select encode(set_byte(set_byte(b, 6, (get_byte(b, 6) & 15) | 128), 8, (get_byte(b, 8) & 63) | 128), 'hex')::uuid
      from (select overlay(substring(sha256(uuid_send(eid) || convert_to(endpoint, 'UTF8')) from 1 for 16)
                           placing substring(uuid_send(eid) from 1 for 6) from 1 for 6) as b) x $$`,
];

/** The session's time zone and functions; returns the layout. `db` must be one connection (a client). */
async function prepareSession(db) {
  await db.query(`set timezone = 'UTC'`);
  // The loader's session only: its batch (a few hundred MB) is sorted and hashed in memory.
  await db.query(`set work_mem = '256MB'`);
  for (const f of TEMP_FUNCTIONS) await db.query(f);
  return layoutOf(db);
}

/**
 * The rows of one batch, `s`: seq g from $3 to $4, event time evenly from $1 (epoch ms) by $2 ms a
 * row. style 'history': lib/common.mjs eventData's data (about 150 bytes; the body about 300),
 * endpoints g % 20, topics (g / 20) % 4, one in `deadEvery` answered 410 and dead (these fall on
 * two of the endpoints, as dead letters gather on broken receivers), attempts of 15-194 ms.
 * style 'backlog': the backlog scenario's rows (endpoint `default`, topic order.paid, data {seq},
 * 3 ms attempts answered "ok"), as its template always had them.
 */
/** A text[] literal of names made here (never input). */
const lit = (xs) => `array[${xs.map((x) => `'${x}'`).join(', ')}]::text[]`;

function rowsCte({ style, layout, endpoints, topics, deadEvery }) {
  const history = style === 'history';
  const eid = layout === 'history' ? 'pg_temp.bench_v7(t)' : 'gen_random_uuid()';
  const data = history
    ? `'{"seq":' || g || ',"order_id":"ord_' || lpad(g::text, 8, '0') || '","amount_cents":' || (1999 + g % 1000)
        || ',"currency":"EUR","customer":{"id":"cus_' || (g * 7919) % 100000 || '","email":"customer' || g % 5000
        || '@example.com"},"items":' || (1 + g % 5) || '}'`
    : `'{"seq":' || g || '}'`;
  // The backlog's body always carried the fuller order data, while its event kept only {seq}.
  const bodyData = history
    ? 'data'
    : `'{"seq":' || g || ',"order_id":"ord_' || lpad(g::text, 8, '0') || '","amount_cents":2500,"currency":"EUR","customer":{"id":"cus_1","email":"customer1@example.com"},"items":2}'`;
  return `s as materialized (
    select y.*, ${layout === 'history' ? 'pg_temp.bench_v8(y.eid, y.endpoint)' : 'null::uuid'} as jid,
      -- delivery_stats' duration bucket, floor(log2(ms + 1)), as a bit length (no numeric log per row)
      least(17, length(ltrim((y.duration_ms + 1)::bit(32)::text, '0')) - 1) as bucket,
      y.t + interval '3 ms' as queued_at, y.t + interval '3 ms' + (y.duration_ms + 2) * interval '1 ms' as finished_at,
      '{"event_id":"' || y.eid || '","topic":"' || y.topic || '","occurred_at":"'
        || to_char(y.t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","data":' || y.body_data || '}' as body
    from (
      select x.*, ${bodyData} as body_data
      from (
        select g, t, ${eid} as eid,
          ${history ? `(${lit(endpoints)})[1 + g % ${endpoints.length}]` : `'default'`} as endpoint,
          ${history ? `(${lit(topics)})[1 + (g / ${endpoints.length}) % ${topics.length}]` : `'order.paid'`} as topic,
          ${deadEvery > 0 ? `g % ${deadEvery} = ${Math.floor(deadEvery / 3)}` : 'false'} as dead,
          ${history ? `15 + (hashint8(g) & 2147483647) % 180` : '3'} as duration_ms,
          ${data} as data,
          (hashint8(g) & 2147483647) % 10 as slot
        from (select g, to_timestamp(($1::float8 + (g - 1) * $2::float8) / 1000) as t from generate_series($3::bigint, $4::bigint) g) z
      ) x
    ) y)`;
}

/** A 2xx answer's body: the backlog's receiver said "ok"; the history's a short JSON. */
const response = (style) => (style === 'history' ? `case when s.dead then 'gone' else '{"received":true}' end` : `'ok'`);
const BUCKETS = Array.from({ length: 18 }, (_, k) => `count(*) filter (where s.bucket = ${k})::int`).join(', ');

/**
 * Where events are written: `event_log` (their day partitions, migration 0012) where it exists,
 * else the `events` table of older builds.
 */
export async function eventsTableOf(db) {
  const r = await db.query(`select to_regclass('event_log') is not null as p`);
  return r.rows[0].p ? 'event_log' : 'events';
}

/**
 * Whether the build's jobs of events in event_log carry no body (migration 0018): the loader then
 * writes them so, as the service does, and their bodies are made from their events when sent.
 */
export async function bodiesByReference(db) {
  const r = await db.query(`select to_regclass('acw_migrations') is not null and exists (select 1 from acw_migrations where id = 18) as b`);
  return r.rows[0].b;
}

/** The payload of a webhook job of the batch's row (`s`): its topic, and its body unless by reference. */
const payloadSql = (byReference, topic, body) =>
  byReference ? `jsonb_build_object('topic', ${topic})` : `jsonb_build_object('topic', ${topic}, 'body', ${body})`;

/** The statement that writes one batch on the history layout. */
function historyBatchSql(spec) {
  return `with ${rowsCte({ ...spec, layout: 'history' })},
  ev as (
    insert into ${spec.eventsTable} (id, topic, data, principal, dispatched_at, created_at)
    select eid, topic, data::jsonb, 'outbox', queued_at, t from s),
  jh as (
    insert into job_history (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at, finished_at,
      event_id, endpoint, topic, series_started_at)
    select jid, 'webhook.deliver', ${payloadSql(spec.byReference, 'topic', 'body')},
      case when dead then 'dead' else 'completed' end, 1, 6, queued_at, case when dead then 'HTTP 410' end, queued_at, finished_at,
      eid, endpoint, topic, queued_at from s),
  ja as (
    insert into job_attempts (job_id, attempt, lease_token, endpoint, status_code, error_kind, error, duration_ms, response_body, dead, created_at)
    select jid, 1, gen_random_uuid(), endpoint, case when dead then 410 else 200 end,
      case when dead then 'http_status' end, case when dead then 'HTTP 410' end, duration_ms, ${response(spec.style)}, dead, finished_at from s),
  ds as (
    insert into delivery_stats as d (minute, endpoint, slot, ok, failed, permanent, buckets, last_at, last_error, last_error_at)
    select date_bin('1 minute', finished_at, timestamptz 'epoch'), endpoint, slot, count(*) filter (where not dead),
      count(*) filter (where dead), count(*) filter (where dead), array[${BUCKETS}], max(finished_at),
      case when bool_or(dead) then 'HTTP 410' end, max(finished_at) filter (where dead)
    from s group by 1, 2, 3
    on conflict (minute, endpoint, slot) do update set
      ok = d.ok + excluded.ok, failed = d.failed + excluded.failed, permanent = d.permanent + excluded.permanent,
      buckets = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(d.buckets, excluded.buckets) u(x, y)),
      last_at = greatest(d.last_at, excluded.last_at), last_error = coalesce(excluded.last_error, d.last_error),
      last_error_at = greatest(d.last_error_at, excluded.last_error_at)),
  jc as (
    insert into job_counts as c (minute, slot, completed, dead)
    select date_bin('1 minute', finished_at, timestamptz 'epoch'), slot, count(*) filter (where not dead), count(*) filter (where dead)
    from s group by 1, 2
    on conflict (minute, slot) do update set completed = c.completed + excluded.completed, dead = c.dead + excluded.dead)
  ${DEAD_LETTERS('jid')}`;
}

/** The dead-letter audit rows (GET /v1/alerts), as src/webhook/dead-letter.ts writes them. */
const DEAD_LETTERS = (jobId) => `insert into audit_log (action, actor, target_type, target_id, details, created_at)
  select 'webhook.dead_letter', 'system', 'job', ${jobId}::text,
    jsonb_build_object('job_id', ${jobId}, 'type', 'webhook.deliver', 'endpoint', endpoint, 'topic', topic, 'event_id', eid,
                       'attempts', 1, 'reason', 'permanent', 'last_error', 'HTTP 410'), finished_at
  from s where dead order by g`;

/** The statement that writes one batch into the single `jobs` table of builds before the history layout. */
function jobsBatchSql(spec) {
  return `with ${rowsCte({ ...spec, layout: 'jobs' })},
  ev as (
    insert into events (id, topic, data, principal, dispatched_at, created_at)
    select eid, topic, data::jsonb, 'outbox', queued_at, t from s),
  j as (
    insert into jobs (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at, updated_at, completed_at, event_id, endpoint)
    select gen_random_uuid(), 'webhook.deliver', jsonb_build_object('topic', topic, 'body', body), case when dead then 'dead' else 'completed' end,
      1, 6, queued_at, case when dead then 'HTTP 410' end, queued_at, finished_at, case when dead then null else finished_at end, eid, endpoint
    from s
    returning id, event_id),
  ja as (
    insert into webhook_attempts (job_id, attempt, endpoint, status_code, error_kind, error, duration_ms, response_body, created_at)
    select j.id, 1, s.endpoint, case when s.dead then 410 else 200 end, case when s.dead then 'http_status' end,
      case when s.dead then 'HTTP 410' end, s.duration_ms, ${response(spec.style)}, s.finished_at
    from s join j on j.event_id = s.eid)
  ${DEAD_LETTERS(`(select j.id from j where j.event_id = s.eid)`)}`;
}

/**
 * Write `rows` finished deliveries with event times evenly spread over [fromMs, toMs), oldest
 * first, in statements of `batch` rows. On the history layout the day partitions they fall in are
 * made first (acw_make_partitions). Returns the layout it wrote.
 */
export async function loadFinished(
  db,
  {
    rows,
    fromMs,
    toMs,
    style = 'history',
    endpoints = HISTORY_ENDPOINTS,
    topics = HISTORY_TOPICS,
    deadEvery = 0,
    batch = 200_000,
    onBatch,
  },
) {
  const layout = await prepareSession(db);
  if (layout === 'history') {
    // The last finish is at most a quarter of a second after the last event.
    await db.query(`select acw_make_partitions(d::date) from generate_series($1::date, $2::date, interval '1 day') d`, [
      new Date(fromMs).toISOString().slice(0, 10),
      new Date(toMs + 1000).toISOString().slice(0, 10),
    ]);
  }
  const eventsTable = await eventsTableOf(db);
  const byReference = await bodiesByReference(db);
  const sql = (layout === 'history' ? historyBatchSql : jobsBatchSql)({ style, endpoints, topics, deadEvery, eventsTable, byReference });
  const step = (toMs - fromMs) / rows;
  for (let lo = 1; lo <= rows; lo += batch) {
    const hi = Math.min(rows, lo + batch - 1);
    await db.query(sql, [fromMs, step, lo, hi]);
    onBatch?.(hi);
  }
  return layout;
}

/**
 * `n` pending jobs due a day from now (each with its dispatched event): the backlog's future rows,
 * on the history layout (older builds' backlog keeps its own statement, systems/acw.mjs).
 */
export async function loadFuture(db, n) {
  await prepareSession(db);
  const eventsTable = await eventsTableOf(db);
  const byReference = await bodiesByReference(db);
  const body = `'{"event_id":"' || e.id || '","topic":"order.paid","occurred_at":"' || to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","data":{"seq":' || g || ',"order_id":"ord_' || lpad(g::text, 8, '0') || '","amount_cents":2500,"currency":"EUR","customer":{"id":"cus_1","email":"customer1@example.com"},"items":2}}'`;
  await db.query(
    `with g as (select g, acw_uuid_v7() as eid, now() as t from generate_series(1, $1::int) g),
     e as (
       insert into ${eventsTable} (id, topic, data, principal, dispatched_at, created_at)
       select eid, 'order.paid', jsonb_build_object('seq', g), 'outbox', t, t from g returning id, created_at),
     e2 as (select e.id, e.created_at, row_number() over () as g from e)
     insert into job_queue (id, type, payload, status, attempts, max_attempts, run_at, event_id, endpoint)
     select pg_temp.bench_v8(e.id, 'default'), 'webhook.deliver', ${payloadSql(byReference, `'order.paid'`, body)}, 'pending', 0, 6,
       now() + interval '1 day' + (g % 3600) * interval '1 second', e.id, 'default'
     from e2 e`,
    [n],
  );
}
