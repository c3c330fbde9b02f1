-- Events leave by whole days (docs/architecture.md#events-by-day).
--
-- Finished jobs and their attempts already leave by dropping a day's partition; events were one
-- table that the purge deleted a day at a time in batches (13 to 23 s for a day of 690,000 events).
-- Now:
--   event_log   the events, partitioned by range on their version 7 id, one partition per UTC day
--               of the id's milliseconds: dropped whole once past the events retention;
--   event_keys  idempotency keys, partitioned by the UTC day they were claimed, dropped whole once
--               past notify.idempotency_retention. A key deduplicates for that long (at least),
--               no longer for its event's whole life: a unique index cannot span partitions of
--               event_log, so the keys live apart, and they leave by day too, never row by row.
-- `events` becomes a view (every event, old and new), with INSTEAD OF triggers for operators' SQL;
-- the service writes event_log itself.
--
-- The old table is renamed events_v1 and stays readable through the view. Nothing is copied: its
-- older ids are random (version 4) and belong to no day. Its undispatched events are dispatched
-- where they are (the outbox pump drains it once), its keys are still looked up, and it is dropped
-- whole once its newest event is past the events retention. Nothing here scans a large table.

-- A process of an older version would keep writing the renamed table: refuse while one runs.
do $$
declare
  v_live text;
begin
  select string_agg(format('%s (%s, last seen %s s ago)', id, mode, round(extract(epoch from now() - last_seen))), ', ' order by id)
    into v_live
    from :"schema".processes
   where last_seen > now() - interval '30 seconds' and coalesce(layout, 0) < 3;
  if v_live is not null then
    raise exception 'migration 0012_events_partitioned moves events to a new layout and cannot run while processes of an older version are running: %. Stop them, or wait 30 seconds after they were killed, then run it again (docs/operations.md#upgrading)', v_live
      using errcode = '55000';
  end if;
end
$$;

-- The first UUID of an instant's millisecond in the version 7 layout (48 bits of Unix
-- milliseconds first, the rest zero): the bounds of event_log's day partitions.
create function :"schema".acw_uuid_floor(p_at timestamptz) returns uuid
language sql immutable strict
as $$
  select encode(substring(int8send(floor(extract(epoch from p_at) * 1000)::bigint) from 3) || '\x00000000000000000000'::bytea, 'hex')::uuid
$$;

create table :"schema".event_log (
  id              uuid not null default :"schema".acw_uuid_v7(),
  topic           text not null constraint event_log_topic_check check (topic ~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$'),
  data            jsonb not null,
  recipients      text[] not null default '{}',
  principal       text not null default '',
  idempotency_key text,
  dispatched_at   timestamptz,
  created_at      timestamptz not null default now(),
  primary key (id)
) partition by range (id);
-- The outbox pump's queue (a partial index per day, merged) and replay's window.
create index event_log_undispatched_idx on :"schema".event_log (created_at, id) where dispatched_at is null;
create index event_log_dispatched_idx on :"schema".event_log (created_at) where dispatched_at is not null;

-- An idempotency key, claimed by the call that wrote its event: the first answer is kept here for
-- the requests that repeat it. The same key may sit in two days' partitions (claimed again after
-- its first day): uniqueness is kept by acw_claim_keys, under a lock per key, not by an index.
create table :"schema".event_keys (
  principal       text not null,
  idempotency_key text not null,
  day             date not null,
  event_id        uuid not null,
  request_hash    text,
  response        jsonb,
  created_at      timestamptz not null default now(),
  primary key (principal, idempotency_key, day)
) partition by range (day);

-- The day partitions of every set: the history's four (migration 0010), event_log's and
-- event_keys'. A plain table checked against its bounds, then attached: no lock that stops
-- inserts into the other partitions.
create or replace function :"schema".acw_make_partitions(p_day date) returns integer
language plpgsql
as $$
declare
  v_parent text;
  v_name text;
  v_check text;
  v_lo text;
  v_hi text;
  v_made integer := 0;
  v_start timestamptz := p_day::timestamp at time zone 'UTC';
  v_end timestamptz := (p_day + 1)::timestamp at time zone 'UTC';
begin
  -- Two processes making the same day at once: the second waits, then finds it made.
  perform pg_advisory_xact_lock(hashtext(:'schema' || '.acw_make_partitions'));
  foreach v_parent in array array['job_history_completed', 'job_history_dead', 'job_attempts_completed', 'job_attempts_dead',
                                  'event_log', 'event_keys'] loop
    v_name := v_parent || '_p' || to_char(p_day, 'YYYYMMDD');
    continue when to_regclass(format('%I.%I', :'schema', v_name)) is not null;
    case v_parent
      when 'event_log' then
        v_lo := :"schema".acw_uuid_floor(v_start)::text;
        v_hi := :"schema".acw_uuid_floor(v_end)::text;
        v_check := format('id >= %L::uuid and id < %L::uuid', v_lo, v_hi);
      when 'event_keys' then
        v_lo := p_day::text;
        v_hi := (p_day + 1)::text;
        v_check := format('day >= %L::date and day < %L::date', v_lo, v_hi);
      else
        v_lo := v_start::text;
        v_hi := v_end::text;
        v_check := format('%I >= %L and %I < %L', case when v_parent like 'job_history_%' then 'finished_at' else 'created_at' end, v_lo,
                          case when v_parent like 'job_history_%' then 'finished_at' else 'created_at' end, v_hi);
    end case;
    execute format('create table %I.%I (like %I.%I including defaults including constraints)', :'schema', v_name, :'schema', v_parent);
    execute format('alter table %I.%I add constraint %I check (%s)', :'schema', v_name, v_name || '_bounds', v_check);
    execute format('alter table %I.%I attach partition %I.%I for values from (%L) to (%L)',
                   :'schema', v_parent, :'schema', v_name, v_lo, v_hi);
    if v_parent like 'job_%' then
      insert into :"schema".history_bounds as b (set, oldest) values (v_parent, v_start)
        on conflict (set) do update set oldest = least(b.oldest, excluded.oldest);
    end if;
    v_made := v_made + 1;
  end loop;
  return v_made;
end
$$;

select :"schema".acw_make_partitions(d::date)
  from generate_series((now() at time zone 'UTC')::date - 1, (now() at time zone 'UTC')::date + 7, interval '1 day') d;

-- Today's and tomorrow's partitions, made here if no process of the service made them (one that
-- was stopped for a week while applications kept writing to the outbox). A catalog lookup when
-- they exist.
create function :"schema".acw_ensure_today() returns void
language plpgsql
as $$
declare
  v_day date := (clock_timestamp() at time zone 'UTC')::date;
begin
  if to_regclass(format('%I.event_keys_p%s', :'schema', to_char(v_day + 1, 'YYYYMMDD'))) is null then
    perform :"schema".acw_make_partitions(v_day);
    perform :"schema".acw_make_partitions(v_day + 1);
  end if;
end
$$;

-- Claim idempotency keys for events about to be written (position n of the arrays: key, event id,
-- request hash, answer). One row per keyed position: `fresh` when this call claimed the key, else
-- the event, hash and answer of the call that holds it (an earlier one, or an earlier position of
-- this call: of a key given twice, the first is claimed). Every caller of a key takes a lock per
-- key until its commit, in bytewise key order (two calls sharing keys cannot deadlock), and the
-- lookup runs in a statement of its own after the locks: under read committed it sees every key
-- that a call holding the lock before it committed. So a key is claimed once while any of its
-- partitions stays, across days, as the unique index on (principal, idempotency_key) did.
create function :"schema".acw_claim_keys(
  p_principal text,
  p_keys text[],
  p_event_ids uuid[],
  p_hashes text[] default null,
  p_responses jsonb[] default null
) returns table (n integer, fresh boolean, event_id uuid, request_hash text, response jsonb)
language plpgsql
as $$
#variable_conflict use_column
declare
  v_principal text := coalesce(p_principal, '');
  v_day date := (clock_timestamp() at time zone 'UTC')::date;
  v_hk text[];
  v_hid uuid[];
  v_hh text[];
  v_hr jsonb[];
  v_lk text[];
  v_lid uuid[];
  v_lh text[];
  v_lr jsonb[];
begin
  perform :"schema".acw_ensure_today();
  perform pg_advisory_xact_lock(hashtextextended(:'schema' || E'.acw_key\n' || v_principal || E'\n' || s.k, 0))
     from (select u.k from unnest(p_keys) u(k) where u.k is not null group by u.k order by u.k collate "C") s;
  select coalesce(array_agg(h.idempotency_key), '{}'), coalesce(array_agg(h.event_id), '{}'),
         coalesce(array_agg(h.request_hash), '{}'), coalesce(array_agg(h.response), '{}')
    into v_hk, v_hid, v_hh, v_hr
    from (select distinct on (k.idempotency_key) k.idempotency_key, k.event_id, k.request_hash, k.response
            from :"schema".event_keys k
           where k.principal = v_principal and k.idempotency_key = any(p_keys)
           order by k.idempotency_key, k.day) h;
  -- Keys of events written before event_keys existed, while that table is kept.
  if to_regclass(format('%I.events_v1', :'schema')) is not null then
    execute format($q$select coalesce(array_agg(e.idempotency_key), '{}'), coalesce(array_agg(e.id), '{}'),
                             coalesce(array_agg(e.request_hash), '{}'), coalesce(array_agg(e.response), '{}')
                        from %I.events_v1 e
                       where e.principal = $1 and e.idempotency_key = any($2) and not (e.idempotency_key = any($3))$q$, :'schema')
      into v_lk, v_lid, v_lh, v_lr
      using v_principal, p_keys, v_hk;
    v_hk := v_hk || v_lk; v_hid := v_hid || v_lid; v_hh := v_hh || v_lh; v_hr := v_hr || v_lr;
  end if;
  return query
  with input as (
    select u.n::integer as n, u.k, u.id, u.h, u.r
      from unnest(p_keys, p_event_ids, coalesce(p_hashes, '{}'), coalesce(p_responses, '{}')) with ordinality as u(k, id, h, r, n)
     where u.k is not null),
  held as (select * from unnest(v_hk, v_hid, v_hh, v_hr) as h(k, id, h, r)),
  claim as (
    select distinct on (i.k) i.n, i.k, i.id, i.h, i.r from input i
     where not exists (select 1 from held where held.k = i.k)
     order by i.k, i.n),
  ins as (
    insert into :"schema".event_keys (principal, idempotency_key, day, event_id, request_hash, response)
    select v_principal, f.k, v_day, f.id, f.h, f.r from claim f order by f.k collate "C")
  select i.n, coalesce(f.n = i.n, false), coalesce(h.id, f.id),
         case when h.k is not null then h.h else f.h end, case when h.k is not null then h.r else f.r end
    from input i
    left join held h on h.k = i.k
    left join claim f on f.k = i.k
   order by i.n;
end
$$;

-- The transactional outbox (docs/integrate.md), same signatures as before: deployed copies call
-- them by position. A key repeated within the retention answers the event that holds it.
create or replace function :"schema".acw_notify(
  p_topic text,
  p_data jsonb,
  p_recipients text[] default '{}',
  p_idempotency_key text default null,
  p_principal text default 'outbox'
) returns uuid
language plpgsql
as $$
declare
  v_id uuid := :"schema".acw_uuid_v7();
  v_principal text := coalesce(p_principal, '');
  v_held uuid;
begin
  if p_topic is null or p_topic !~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$' then
    raise exception 'topic: expected lowercase dot-separated words, got %', coalesce(quote_literal(p_topic), 'null')
      using errcode = '22023';
  end if;
  perform :"schema".acw_ensure_today();
  if p_idempotency_key is not null then
    select c.event_id into v_held
      from :"schema".acw_claim_keys(v_principal, array[p_idempotency_key], array[v_id]) c where not c.fresh;
  end if;
  if v_held is null then
    insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key)
    values (v_id, p_topic, coalesce(p_data, 'null'::jsonb), coalesce(p_recipients, '{}'), v_principal, p_idempotency_key);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return coalesce(v_held, v_id);
end
$$;

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
  v_held uuid[];
  v_bad bigint;
  v_bad_topic text;
begin
  if jsonb_typeof(p_events) is distinct from 'array' then
    raise exception 'events: expected a JSON array, got %', coalesce(jsonb_typeof(p_events), 'null')
      using errcode = '22023';
  end if;
  -- Ids are drawn up front so each answer is tied to its input position.
  select array_agg(:"schema".acw_uuid_v7() order by t.n), array_agg(t.idempotency_key order by t.n),
         min(t.n) filter (where not coalesce(t.topic ~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$', false)),
         (array_agg(t.topic order by t.n) filter (where not coalesce(t.topic ~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$', false)))[1]
    into v_ids, v_keys, v_bad, v_bad_topic
    from rows from (jsonb_to_recordset(p_events) as (topic text, idempotency_key text)) with ordinality as t(topic, idempotency_key, n);
  if v_bad is not null then
    raise exception 'events[%].topic: expected lowercase dot-separated words, got %', v_bad - 1,
      coalesce(quote_literal(v_bad_topic), 'null') using errcode = '22023';
  end if;
  if v_ids is null then
    return '{}';
  end if;
  perform :"schema".acw_ensure_today();
  -- Keys taken (earlier, or by an earlier position of this batch): those positions answer the
  -- event holding the key and write nothing.
  if exists (select 1 from unnest(v_keys) k where k is not null) then
    select array_agg(case when c.fresh is false then c.event_id end order by u.n) into v_held
      from unnest(v_ids) with ordinality as u(id, n)
      left join :"schema".acw_claim_keys(v_principal, v_keys, v_ids) c on c.n = u.n;
  end if;
  insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key)
  select v_ids[t.n], t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), v_principal, t.idempotency_key
    from rows from (jsonb_to_recordset(p_events) as (topic text, data jsonb, recipients text[], idempotency_key text))
         with ordinality as t(topic, data, recipients, idempotency_key, n)
   where v_held[t.n] is null
   order by t.n;
  if v_held is not null then
    select array_agg(coalesce(v_held[u.n], u.id) order by u.n) into v_ids from unnest(v_ids) with ordinality as u(id, n);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return v_ids;
end
$$;

-- /v1/stats counts dead jobs exactly up to a bound: an index-only read of this small partial index
-- (dead jobs only: no entry for a completed or cancelled one) instead of a scan of history rows.
create index job_history_dead_only_idx on :"schema".job_history_dead (created_at, id) where status = 'dead';

-- The old table's name goes to the view. From here to the commit the rename's exclusive lock is
-- held: nothing after it reads the old table beyond one row.
alter table :"schema".events rename to events_v1;

-- Every event, as before: the day partitions, and the old table until it is dropped. Remade by
-- this function without the old table before it goes (src/history/upgrade.ts).
create function :"schema".acw_define_event_views(p_legacy boolean) returns void
language plpgsql
as $$
begin
  execute format($v$create or replace view %1$I.events as
    select id, topic, data, recipients, principal, idempotency_key, dispatched_at, created_at from %1$I.event_log
    %2$s$v$, :'schema',
    case when p_legacy then format($l$union all
    select id, topic, data, recipients, principal, idempotency_key, dispatched_at, created_at from %1$I.events_v1$l$, :'schema')
    else '' end);
end
$$;
do $$
declare
  v_legacy boolean := exists (select 1 from :"schema".events_v1);
begin
  perform :"schema".acw_define_event_views(v_legacy);
  if not v_legacy then
    drop table :"schema".events_v1;
  end if;
end
$$;

-- Writes through the view (operators' own SQL, older scripts) land in the table that holds the row.
-- An inserted event needs a version 7 id of a day that has (or may have) a partition: the default.
create function :"schema".acw_events_write() returns trigger
language plpgsql
as $$
declare
  v_legacy boolean := to_regclass(format('%I.events_v1', :'schema')) is not null;
  v_day date;
begin
  if tg_op = 'DELETE' then
    delete from :"schema".event_log where id = old.id;
    if not found and v_legacy then
      execute format('delete from %I.events_v1 where id = $1', :'schema') using old.id;
    end if;
    return old;
  end if;
  if tg_op = 'UPDATE' then
    update :"schema".event_log set id = new.id, topic = new.topic, data = new.data, recipients = new.recipients,
      principal = new.principal, idempotency_key = new.idempotency_key, dispatched_at = new.dispatched_at, created_at = new.created_at
     where id = old.id;
    if not found and v_legacy then
      execute format('update %I.events_v1 set topic = $2, data = $3, recipients = $4, principal = $5, idempotency_key = $6,
                        dispatched_at = $7, created_at = $8 where id = $1', :'schema')
        using old.id, new.topic, new.data, new.recipients, new.principal, new.idempotency_key, new.dispatched_at, new.created_at;
    end if;
    return new;
  end if;
  new.id := coalesce(new.id, :"schema".acw_uuid_v7());
  v_day := (to_timestamp(('x' || substr(replace(new.id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0) at time zone 'UTC')::date;
  if v_day not between (now() at time zone 'UTC')::date - 400 and (now() at time zone 'UTC')::date + 7 then
    raise exception 'events.id: expected a version 7 UUID of the last 400 days (its first 48 bits are Unix milliseconds), got %', new.id
      using errcode = '22023';
  end if;
  if to_regclass(format('%I.event_log_p%s', :'schema', to_char(v_day, 'YYYYMMDD'))) is null then
    perform :"schema".acw_make_partitions(v_day);
  end if;
  insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key, dispatched_at, created_at)
  values (new.id, new.topic, new.data, coalesce(new.recipients, '{}'), coalesce(new.principal, ''), new.idempotency_key,
          new.dispatched_at, coalesce(new.created_at, now()))
  returning recipients, principal, created_at into new.recipients, new.principal, new.created_at;
  return new;
end
$$;
create trigger events_write instead of insert or update or delete on :"schema".events
  for each row execute function :"schema".acw_events_write();

