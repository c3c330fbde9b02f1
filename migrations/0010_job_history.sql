-- Live jobs apart from their history (docs/architecture.md#live-jobs-and-history).
--
-- The claim, the reaper, the circuit's hold and the dispatcher only ever touch pending and running
-- jobs, but they shared one table and its indexes with every finished delivery ever kept: each state
-- change wrote into indexes that covered the whole history, and a purge deleted row by row. Now:
--   job_queue     pending and running jobs only: few rows, few indexes, tuned as a queue table;
--   job_history   finished jobs (completed, dead, cancelled), moved there by the statement that
--                 finishes them, partitioned by status set and then by the UTC day they finished;
--   job_attempts  one row per HTTP attempt, partitioned by whether its job went dead and by day;
--   delivery_stats per-minute counters per endpoint, written by the outcome statements, which the
--                 operator reads (/v1/stats, GET /v1/endpoints) add up instead of attempt rows.
-- `jobs` and `webhook_attempts` become views over them, so every read of every status still works.
-- History leaves by whole days: the purge detaches and drops a day's partition past retention.
--
-- The old tables are renamed jobs_v1 and webhook_attempts_v1 and stay readable through the views;
-- the history_upgrade runner moves their live rows into job_queue at once and their finished jobs
-- into job_history in batches, then drops jobs_v1; webhook_attempts_v1 ages out (dropped past
-- dead_retention). Nothing here scans a large table, so the locks it takes are brief.

-- A process of an older version would keep writing the renamed table: refuse while one runs.
do $$
declare
  v_live text;
begin
  select string_agg(format('%s (%s, last seen %s s ago)', id, mode, round(extract(epoch from now() - last_seen))), ', ' order by id)
    into v_live
    from :"schema".processes
   where last_seen > now() - interval '30 seconds';
  if v_live is not null then
    raise exception 'migration 0010_job_history moves jobs to a new layout and cannot run while processes of an older version are running: %. Stop them, or wait 30 seconds after they were killed, then run it again (docs/operations.md#upgrading)', v_live
      using errcode = '55000';
  end if;
end
$$;

alter table :"schema".jobs rename to jobs_v1;
alter table :"schema".webhook_attempts rename to webhook_attempts_v1;
-- The old chart counts came from this trigger; the outcome statements now write delivery_stats.
drop trigger webhook_attempts_count on :"schema".webhook_attempts_v1;
drop function :"schema".acw_count_deliveries();

-- Pending and running jobs. fillfactor leaves room on each page so that a lease renewal (which
-- changes no indexed column) stays a HOT update; autovacuum comes early because every job passes
-- through and leaves a dead tuple behind.
create table :"schema".job_queue (
  id                uuid primary key,
  type              text not null,
  payload           jsonb not null default '{}',
  status            text not null default 'pending' check (status in ('pending', 'running')),
  attempts          integer not null default 0,
  max_attempts      integer not null default 6 check (max_attempts >= 1),
  run_at            timestamptz not null default now(),
  locked_by         text,
  lease_token       uuid,
  lease_expires_at  timestamptz,
  last_error        text,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  event_id          uuid,
  endpoint          text,
  parked_since      timestamptz,
  skipped_since     timestamptz,
  series_started_at timestamptz not null default now()
) with (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
-- The claims' ranges (as before), now over live jobs only.
create index job_queue_due_idx on :"schema".job_queue (run_at, id) where status = 'pending';
create index job_queue_due_endpoint_idx on :"schema".job_queue (endpoint, run_at, id) where status = 'pending';
create index job_queue_due_unkeyed_idx on :"schema".job_queue (run_at, id) where status = 'pending' and endpoint is null;
-- The reaper's range: keyed on a column a lease renewal leaves alone, so renewals stay HOT.
create index job_queue_running_idx on :"schema".job_queue (locked_by) where status = 'running';
-- Newest-first lists of live jobs.
create index job_queue_created_idx on :"schema".job_queue (created_at, id);

-- Finished jobs. The partition key is the status set (completed ones and dead or cancelled ones keep
-- for different retentions) and then the UTC day the job finished. Keys arrive in time order (job
-- ids begin with their event's time), so the indexes are written at their right edge.
create table :"schema".job_history (
  id                uuid not null,
  type              text not null,
  payload           jsonb not null,
  status            text not null,
  attempts          integer not null,
  max_attempts      integer not null,
  run_at            timestamptz not null,
  last_error        text,
  created_at        timestamptz not null,
  finished_at       timestamptz not null,
  event_id          uuid,
  endpoint          text,
  -- The payload's topic, kept apart so that the topic filter has an index.
  topic             text,
  series_started_at timestamptz not null
) partition by list (status);
create table :"schema".job_history_completed partition of :"schema".job_history
  for values in ('completed') partition by range (finished_at);
create table :"schema".job_history_dead partition of :"schema".job_history
  for values in ('dead', 'cancelled') partition by range (finished_at);
create index job_history_id_idx on :"schema".job_history (id);
create index job_history_created_idx on :"schema".job_history (created_at, id);
create index job_history_endpoint_idx on :"schema".job_history (endpoint, created_at, id) where endpoint is not null;
create index job_history_topic_idx on :"schema".job_history (topic, created_at, id) where topic is not null;
create index job_history_event_idx on :"schema".job_history (event_id) where event_id is not null;
-- Application jobs by type (webhook deliveries, nearly every row, are found through created_at).
create index job_history_type_idx on :"schema".job_history (type, created_at, id) where type <> 'webhook.deliver';

-- HTTP attempts. An attempt is kept as long as its job: `dead` says its job went dead or was
-- cancelled (the transition that does so moves the job's earlier attempts over).
create sequence :"schema".job_attempts_id_seq;
create table :"schema".job_attempts (
  id            bigint not null default nextval(':"schema".job_attempts_id_seq'),
  job_id        uuid not null,
  attempt       integer not null,
  lease_token   uuid not null,
  endpoint      text,
  status_code   integer,
  error_kind    text,
  error         text,
  duration_ms   integer not null,
  response_body text,
  lease_lost    boolean not null default false,
  aborted       boolean not null default false,
  probe         boolean not null default false,
  dead          boolean not null default false,
  created_at    timestamptz not null default now()
) partition by list (dead);
alter sequence :"schema".job_attempts_id_seq owned by :"schema".job_attempts.id;
create table :"schema".job_attempts_completed partition of :"schema".job_attempts
  for values in (false) partition by range (created_at);
create table :"schema".job_attempts_dead partition of :"schema".job_attempts
  for values in (true) partition by range (created_at);
create index job_attempts_job_idx on :"schema".job_attempts (job_id, lease_token);

-- The oldest day partition of each set. A job going dead moves its earlier attempts into the dead
-- set (row movement by created_at); attempts older than that set's oldest day stay where they are,
-- since there is no partition there to take them (src/history/partitions.ts keeps this current).
create table :"schema".history_bounds (
  set    text primary key,
  oldest timestamptz not null
);

-- Attempt partitions whose 2xx response bodies the purge has cleared (jobs.job_purge.success_body_retention).
create table :"schema".history_cleared (
  partition  text primary key,
  cleared_at timestamptz not null default now()
);

-- Which day partitions exist is the partitions module's business (src/history/partitions.ts); it
-- calls this to make one UTC day's partition in each set: a plain table checked against its
-- bounds, then attached, which takes no lock that would stop inserts into the other partitions.
-- All four sets get the same days (the purge drops each set's days at its own retention).
create function :"schema".acw_make_partitions(p_day date) returns integer
language plpgsql
as $$
declare
  v_parent text;
  v_name text;
  v_key text;
  v_made integer := 0;
  v_lo timestamptz := p_day::timestamp at time zone 'UTC';
  v_hi timestamptz := (p_day + 1)::timestamp at time zone 'UTC';
begin
  -- Two processes making the same day at once: the second waits, then finds it made.
  perform pg_advisory_xact_lock(hashtext(:'schema' || '.acw_make_partitions'));
  foreach v_parent in array array['job_history_completed', 'job_history_dead', 'job_attempts_completed', 'job_attempts_dead'] loop
    v_name := v_parent || '_p' || to_char(p_day, 'YYYYMMDD');
    continue when to_regclass(format('%I.%I', :'schema', v_name)) is not null;
    v_key := case when v_parent like 'job_history_%' then 'finished_at' else 'created_at' end;
    execute format('create table %I.%I (like %I.%I including defaults)', :'schema', v_name, :'schema', v_parent);
    execute format('alter table %I.%I add constraint %I check (%I >= %L and %I < %L)',
                   :'schema', v_name, v_name || '_bounds', v_key, v_lo, v_key, v_hi);
    execute format('alter table %I.%I attach partition %I.%I for values from (%L) to (%L)',
                   :'schema', v_parent, :'schema', v_name, v_lo, v_hi);
    insert into :"schema".history_bounds as b (set, oldest) values (v_parent, v_lo)
      on conflict (set) do update set oldest = least(b.oldest, excluded.oldest);
    v_made := v_made + 1;
  end loop;
  return v_made;
end
$$;

-- Today's partitions and the next few days' exist from the start; older days are made as the
-- upgrade of old history needs them, and the purge runner keeps days ahead made.
select :"schema".acw_make_partitions(d::date)
  from generate_series((now() at time zone 'UTC')::date - 1, (now() at time zone 'UTC')::date + 7, interval '1 day') d;

-- Deliveries per minute and endpoint (GET /v1/stats, GET /v1/endpoints): added up over a window,
-- never counted from attempt rows. Written by the statement that writes the attempts, one row per
-- minute, endpoint and writing connection's slot, so concurrent writers do not wait on one row.
-- `buckets` counts attempt durations by powers of two (bucket k: under 2^k ms), for percentiles.
create table :"schema".delivery_stats (
  minute        timestamptz not null,
  endpoint      text not null,
  slot          smallint not null,
  ok            integer not null default 0,
  failed        integer not null default 0,
  permanent     integer not null default 0,
  buckets       integer[] not null,
  last_at       timestamptz not null,
  last_error    text,
  last_error_at timestamptz,
  primary key (minute, endpoint, slot)
);
-- Jobs finished per minute, by how (GET /v1/stats: completed and cancelled in the last 24 hours),
-- written by the statements that move jobs into job_history, slotted like delivery_stats.
create table :"schema".job_counts (
  minute    timestamptz not null,
  slot      smallint not null,
  completed integer not null default 0,
  dead      integer not null default 0,
  cancelled integer not null default 0,
  primary key (minute, slot)
);
insert into :"schema".job_counts (minute, slot, completed, cancelled)
select date_bin('1 minute', coalesce(completed_at, updated_at), timestamptz 'epoch'), 0,
       count(*) filter (where status = 'completed'), count(*) filter (where status = 'cancelled')
  from :"schema".jobs_v1
 where (status = 'completed' and completed_at > now() - interval '25 hours') or (status = 'cancelled' and updated_at > now() - interval '25 hours')
 group by 1;

-- The old per-minute counts (all endpoints together) keep the charts full across the upgrade.
insert into :"schema".delivery_stats (minute, endpoint, slot, ok, failed, buckets, last_at)
select minute, '', slot, ok, failed, '{}', minute from :"schema".delivery_counts
 where minute > now() - interval '2 days';
drop table :"schema".delivery_counts;

-- Every status, as before: the live table, the history, and the old tables until they are gone.
-- The views are (re)made by this function: the upgrade runner makes them again without the old
-- tables before it drops them (src/history/upgrade.ts).
create function :"schema".acw_define_views(p_legacy_jobs boolean, p_legacy_attempts boolean) returns void
language plpgsql
as $$
begin
  execute format($v$create or replace view %1$I.jobs as
    select id, type, payload, status, attempts, max_attempts, run_at, locked_by, lease_token, lease_expires_at,
           last_error, created_at, updated_at, null::timestamptz as completed_at, event_id, endpoint,
           parked_since, skipped_since, series_started_at, payload->>'topic' as topic, null::timestamptz as finished_at
      from %1$I.job_queue
    union all
    select id, type, payload, status, attempts, max_attempts, run_at, null::text, null::uuid, null::timestamptz,
           last_error, created_at, finished_at, case when status = 'completed' then finished_at end, event_id, endpoint,
           null::timestamptz, null::timestamptz, series_started_at, topic, finished_at
      from %1$I.job_history
    %2$s$v$, :'schema',
    case when p_legacy_jobs then format($l$union all
    select id, type, payload, status, attempts, max_attempts, run_at, locked_by, lease_token, lease_expires_at,
           last_error, created_at, updated_at, completed_at, event_id, endpoint, parked_since, skipped_since,
           series_started_at, payload->>'topic', case when status in ('completed', 'dead', 'cancelled') then updated_at end
      from %1$I.jobs_v1$l$, :'schema') else '' end);
  execute format($v$create or replace view %1$I.webhook_attempts as
    select id, job_id, attempt, lease_token, endpoint, status_code, error_kind, error, duration_ms, response_body,
           lease_lost, aborted, created_at, probe
      from %1$I.job_attempts
    %2$s$v$, :'schema',
    case when p_legacy_attempts then format($l$union all
    select id, job_id, attempt, lease_token, endpoint, status_code, error_kind, error, duration_ms, response_body,
           lease_lost, aborted, created_at, probe
      from %1$I.webhook_attempts_v1$l$, :'schema') else '' end);
end
$$;
-- A database with no old rows (a new installation) has nothing to upgrade: the old tables go now.
do $$
declare
  v_jobs boolean := exists (select 1 from :"schema".jobs_v1);
  v_attempts boolean := exists (select 1 from :"schema".webhook_attempts_v1);
begin
  perform :"schema".acw_define_views(v_jobs, v_attempts);
  if not v_jobs then
    drop table :"schema".jobs_v1;
  end if;
  if not v_attempts then
    drop table :"schema".webhook_attempts_v1;
  end if;
end
$$;

-- Writes through the views, for operators' own SQL and older scripts: an insert, update or delete
-- on `jobs` or `webhook_attempts` lands in the table that holds the row now (an update that finishes
-- or requeues a job moves it). The service itself writes the tables directly.
create function :"schema".acw_jobs_write() returns trigger
language plpgsql
as $$
declare
  v_row :"schema".job_queue;
  v_hist :"schema".job_history;
  v_fin timestamptz;
  v_was_history boolean;
begin
  if tg_op in ('UPDATE', 'DELETE') then
    delete from :"schema".job_queue where id = old.id;
    if not found then
      delete from :"schema".job_history where id = old.id;
      v_was_history := found;
      -- An update rewrites when (or how) the job finished: its count moves with it.
      if v_was_history and tg_op = 'UPDATE' then
        insert into :"schema".job_counts as c (minute, slot, completed, dead, cancelled)
        values (date_bin('1 minute', old.finished_at, timestamptz 'epoch'), 0, -(old.status = 'completed')::int,
                -(old.status = 'dead')::int, -(old.status = 'cancelled')::int)
        on conflict (minute, slot) do update set
          completed = c.completed + excluded.completed, dead = c.dead + excluded.dead, cancelled = c.cancelled + excluded.cancelled;
      end if;
      if not v_was_history and to_regclass(:'schema' || '.jobs_v1') is not null then
        execute format('delete from %I.jobs_v1 where id = $1', :'schema') using old.id;
      end if;
    end if;
    if tg_op = 'DELETE' then
      return old;
    end if;
  end if;
  if coalesce(new.status, 'pending') in ('pending', 'running') then
    insert into :"schema".job_queue (id, type, payload, status, attempts, max_attempts, run_at, locked_by, lease_token,
      lease_expires_at, last_error, created_at, updated_at, event_id, endpoint, parked_since, skipped_since, series_started_at)
    values (coalesce(new.id, gen_random_uuid()), new.type, coalesce(new.payload, '{}'), coalesce(new.status, 'pending'),
      coalesce(new.attempts, 0), coalesce(new.max_attempts, 6), coalesce(new.run_at, now()), new.locked_by, new.lease_token,
      new.lease_expires_at, new.last_error, coalesce(new.created_at, now()), coalesce(new.updated_at, now()), new.event_id,
      new.endpoint, new.parked_since, new.skipped_since, coalesce(new.series_started_at, now()))
    returning * into v_row;
    new.id := v_row.id; new.payload := v_row.payload; new.status := v_row.status; new.attempts := v_row.attempts;
    new.max_attempts := v_row.max_attempts; new.run_at := v_row.run_at; new.created_at := v_row.created_at;
    new.updated_at := v_row.updated_at; new.series_started_at := v_row.series_started_at;
    new.completed_at := null; new.finished_at := null; new.topic := v_row.payload->>'topic';
  else
    v_fin := case when new.status = 'completed' then coalesce(new.completed_at, new.updated_at, now()) else coalesce(new.updated_at, now()) end;
    perform :"schema".acw_make_partitions((v_fin at time zone 'UTC')::date);
    insert into :"schema".job_history (id, type, payload, status, attempts, max_attempts, run_at, last_error, created_at,
      finished_at, event_id, endpoint, topic, series_started_at)
    values (coalesce(new.id, gen_random_uuid()), new.type, coalesce(new.payload, '{}'), new.status, coalesce(new.attempts, 0),
      coalesce(new.max_attempts, 6), coalesce(new.run_at, now()), new.last_error, coalesce(new.created_at, now()), v_fin,
      new.event_id, new.endpoint, coalesce(new.payload, '{}')->>'topic', coalesce(new.series_started_at, now()))
    returning * into v_hist;
    new.id := v_hist.id; new.payload := v_hist.payload; new.attempts := v_hist.attempts; new.max_attempts := v_hist.max_attempts;
    new.run_at := v_hist.run_at; new.created_at := v_hist.created_at; new.updated_at := v_fin; new.finished_at := v_fin;
    new.completed_at := case when new.status = 'completed' then v_fin end; new.topic := v_hist.topic;
    new.series_started_at := v_hist.series_started_at;
    new.locked_by := null; new.lease_token := null; new.lease_expires_at := null; new.parked_since := null; new.skipped_since := null;
    insert into :"schema".job_counts as c (minute, slot, completed, dead, cancelled)
    values (date_bin('1 minute', v_fin, timestamptz 'epoch'), 0, (new.status = 'completed')::int, (new.status = 'dead')::int,
            (new.status = 'cancelled')::int)
    on conflict (minute, slot) do update set
      completed = c.completed + excluded.completed, dead = c.dead + excluded.dead, cancelled = c.cancelled + excluded.cancelled;
  end if;
  return new;
end
$$;
create trigger jobs_write instead of insert or update or delete on :"schema".jobs
  for each row execute function :"schema".acw_jobs_write();

-- An attempt written through the view is counted as the outcome statements count theirs.
create function :"schema".acw_attempts_write() returns trigger
language plpgsql
as $$
declare
  v_at timestamptz := coalesce(new.created_at, now());
  v_dead boolean := exists (select 1 from :"schema".job_history where id = new.job_id and status in ('dead', 'cancelled'));
begin
  if tg_op <> 'INSERT' then
    raise exception 'webhook_attempts: only inserts are supported through the view; change job_attempts itself'
      using errcode = '0A000';
  end if;
  perform :"schema".acw_make_partitions((v_at at time zone 'UTC')::date);
  insert into :"schema".job_attempts (job_id, attempt, lease_token, endpoint, status_code, error_kind, error, duration_ms,
    response_body, lease_lost, aborted, probe, dead, created_at)
  values (new.job_id, new.attempt, coalesce(new.lease_token, gen_random_uuid()), new.endpoint, new.status_code, new.error_kind,
    new.error, coalesce(new.duration_ms, 0), new.response_body, coalesce(new.lease_lost, false), coalesce(new.aborted, false),
    coalesce(new.probe, false), v_dead, v_at)
  returning id, lease_token into new.id, new.lease_token;
  new.created_at := v_at;
  if not coalesce(new.aborted, false) then
    insert into :"schema".delivery_stats as s (minute, endpoint, slot, ok, failed, permanent, buckets, last_at, last_error, last_error_at)
    values (date_bin('1 minute', v_at, timestamptz 'epoch'), coalesce(new.endpoint, ''), 0,
      coalesce(new.status_code between 200 and 299, false)::int, coalesce(new.status_code not between 200 and 299, true)::int,
      coalesce(new.status_code between 400 and 499 and new.status_code not in (408, 425, 429), false)::int,
      array(select (k = least(17, floor(log(2.0, coalesce(new.duration_ms, 0) + 1.0))))::int from generate_series(0, 17) k),
      v_at, case when new.error_kind is not null then coalesce(new.error, new.error_kind) end,
      case when new.error_kind is not null then v_at end)
    on conflict (minute, endpoint, slot) do update set
      ok = s.ok + excluded.ok, failed = s.failed + excluded.failed, permanent = s.permanent + excluded.permanent,
      buckets = array(select coalesce(x, 0) + coalesce(y, 0) from unnest(s.buckets, excluded.buckets) u(x, y)),
      last_at = greatest(s.last_at, excluded.last_at),
      last_error = coalesce(excluded.last_error, s.last_error), last_error_at = greatest(s.last_error_at, excluded.last_error_at);
  end if;
  return new;
end
$$;
create trigger webhook_attempts_write instead of insert or update or delete on :"schema".webhook_attempts
  for each row execute function :"schema".acw_attempts_write();

-- Events whose ids come from SQL (the outbox functions) get version 7 ids too, so that their jobs'
-- ids, which begin with the event's time, arrive in time order. Portable to PostgreSQL 14.
create function :"schema".acw_uuid_v7() returns uuid
language sql volatile
as $$
  select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6),
         52, 1), 53, 1), 'hex')::uuid
$$;
alter table :"schema".events alter column id set default :"schema".acw_uuid_v7();
-- acw_notify_many drew its ids itself: the same function, with version 7 ids.
create or replace function :"schema".acw_notify_many(
  p_events jsonb,
  p_principal text default 'outbox'
) returns uuid[]
language plpgsql
as $$
declare
  v_principal text := coalesce(p_principal, '');
  v_ids uuid[];
  v_keys text[];
  v_inserted bigint;
  v_bad bigint;
  v_bad_topic text;
begin
  if jsonb_typeof(p_events) is distinct from 'array' then
    raise exception 'events: expected a JSON array, got %', coalesce(jsonb_typeof(p_events), 'null')
      using errcode = '22023';
  end if;
  -- Ids are drawn up front so each answer is tied to its input position, whatever order the rows
  -- are written in. Rows are written in key order (bytewise; keyless rows last): two batches that
  -- share keys then take their locks in the same order and cannot deadlock. For a key given twice
  -- in the batch, the first occurrence is written and the later one conflicts with it.
  with input as materialized (
    select :"schema".acw_uuid_v7() as id, t.n, t.topic, t.data, t.recipients, t.idempotency_key,
           coalesce(t.topic ~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$', false) as ok
      from rows from (jsonb_to_recordset(p_events) as (topic text, data jsonb, recipients text[], idempotency_key text))
           with ordinality as t(topic, data, recipients, idempotency_key, n)
  ), ins as (
    insert into :"schema".events (id, topic, data, recipients, principal, idempotency_key)
    select id, topic, coalesce(data, 'null'::jsonb), coalesce(recipients, '{}'), v_principal, idempotency_key
      from input
     where ok
     order by idempotency_key collate "C", n
    on conflict (principal, idempotency_key) do nothing
    returning 1
  )
  select array_agg(id order by n), array_agg(idempotency_key order by n), (select count(*) from ins),
         min(n) filter (where not ok), (array_agg(topic order by n) filter (where not ok))[1]
    into v_ids, v_keys, v_inserted, v_bad, v_bad_topic
    from input;
  if v_bad is not null then
    -- Raised after the insert, which skipped the bad rows: the failed call undoes the others.
    raise exception 'events[%].topic: expected lowercase dot-separated words, got %', v_bad - 1,
      coalesce(quote_literal(v_bad_topic), 'null') using errcode = '22023';
  end if;
  if v_ids is null then
    return '{}';
  end if;
  if v_inserted < cardinality(v_ids) then
    -- Some keys were taken. Answer every keyed position with the event now holding its key: a
    -- separate statement, so under read committed it sees an event that a concurrent transaction
    -- committed while our insert waited for it (as acw_notify's lookup does).
    select array_agg(coalesce(e.id, u.id) order by u.n) into v_ids
      from unnest(v_ids, v_keys) with ordinality as u(id, k, n)
      left join :"schema".events e on e.principal = v_principal and e.idempotency_key = u.k;
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return v_ids;
end
$$;


-- The process registry records which job layout a process writes: the next migration that changes
-- it can tell older processes from newer ones.
alter table :"schema".processes add column layout integer;
