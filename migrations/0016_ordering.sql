-- Ordered delivery per key (docs/operations.md#ordered-delivery).
--
-- An event may carry an ordering key. Per endpoint and key one delivery is in flight: the key's
-- head, a live job (pending or running) like any other; the jobs after it wait in job_queue with
-- status 'behind', which no claim, reaper or held-jobs sweep reads (their indexes are partial on
-- the other statuses), so unkeyed jobs pay nothing. ordering_keys holds, per (endpoint, key), the
-- head's id and two counters: the sequence receivers see (X-ACW-Sequence, fixed at fan-out and kept
-- by replay) and the position in the key's queue (every entry: fan-out, retry, redrive, replay).
-- Every change of a key's head happens under that row's lock, in a statement that runs after it
-- was taken, so it sees every job a dispatcher that held the lock before it committed.

-- The event's key (1..256 bytes, checked by notify and the outbox functions).
alter table :"schema".event_log add column ordering_key text;

alter table :"schema".job_queue add column ordering_key text;
alter table :"schema".job_queue add column ordering_seq bigint;
alter table :"schema".job_queue add column ordering_pos bigint;
alter table :"schema".job_queue drop constraint job_queue_status_check;
alter table :"schema".job_queue add constraint job_queue_status_check check (status in ('pending', 'running', 'behind'));
-- The next job of a key: one index read, whatever its backlog.
create index job_queue_behind_idx on :"schema".job_queue (endpoint, ordering_key, ordering_pos) where status = 'behind';

alter table :"schema".job_history add column ordering_key text;
alter table :"schema".job_history add column ordering_seq bigint;

create table :"schema".ordering_keys (
  endpoint     text not null,
  ordering_key text not null,
  -- The last sequence number and queue position given out.
  last_seq     bigint not null,
  last_pos     bigint not null,
  -- The live head (pending or running), or the dead head of a blocked key; null: nothing in flight.
  head         uuid,
  -- The endpoint's `ordering` setting as of the last fan-out: strict blocks the key on a dead head.
  strict       boolean not null default false,
  blocked_at   timestamptz,
  updated_at   timestamptz not null default now(),
  primary key (endpoint, ordering_key)
) with (fillfactor = 80);
create index ordering_keys_blocked_idx on :"schema".ordering_keys (endpoint, blocked_at) where blocked_at is not null;

-- The jobs view with the key and sequence; a job behind its key's head is pending to operators.
create or replace function :"schema".acw_define_views(p_legacy_jobs boolean, p_legacy_attempts boolean) returns void
language plpgsql
as $$
begin
  execute format($v$create or replace view %1$I.jobs as
    select id, type, payload, case when status = 'behind' then 'pending' else status end as status, attempts, max_attempts, run_at,
           locked_by, lease_token, lease_expires_at,
           last_error, created_at, updated_at, null::timestamptz as completed_at, event_id, endpoint,
           parked_since, skipped_since, series_started_at, payload->>'topic' as topic, null::timestamptz as finished_at,
           ordering_key, ordering_seq
      from %1$I.job_queue
    union all
    select id, type, payload, status, attempts, max_attempts, run_at, null::text, null::uuid, null::timestamptz,
           last_error, created_at, finished_at, case when status = 'completed' then finished_at end, event_id, endpoint,
           null::timestamptz, null::timestamptz, series_started_at, topic, finished_at, ordering_key, ordering_seq
      from %1$I.job_history
    %2$s$v$, :'schema',
    case when p_legacy_jobs then format($l$union all
    select id, type, payload, status, attempts, max_attempts, run_at, locked_by, lease_token, lease_expires_at,
           last_error, created_at, updated_at, completed_at, event_id, endpoint, parked_since, skipped_since,
           series_started_at, payload->>'topic', case when status in ('completed', 'dead', 'cancelled') then updated_at end,
           null::text, null::bigint
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
select :"schema".acw_define_views(to_regclass(format('%I.jobs_v1', :'schema')) is not null,
                                  to_regclass(format('%I.webhook_attempts_v1', :'schema')) is not null);

-- An ordering key as the outbox functions take it: null when absent (or JSON null), else a string
-- of 1..256 bytes; `field` names it in the error.
create function :"schema".acw_ordering_key(p_value jsonb, p_field text) returns text
language plpgsql immutable
as $$
begin
  if p_value is null or jsonb_typeof(p_value) = 'null' then
    return null;
  end if;
  if jsonb_typeof(p_value) <> 'string' then
    raise exception '%: expected a string, got %', p_field, jsonb_typeof(p_value) using errcode = '22023';
  end if;
  if octet_length(p_value #>> '{}') not between 1 and 256 then
    raise exception '%: expected 1 to 256 bytes, got %', p_field, octet_length(p_value #>> '{}') using errcode = '22023';
  end if;
  return p_value #>> '{}';
end
$$;

-- The transactional outbox (docs/integrate.md) gains a sixth parameter, `p_options`, a JSON object:
-- `ordering_key`, and the producer's `traceparent` and `tracestate` (migration 0014's columns), are
-- read from it; keys not known to this version are ignored, so newer callers keep working. Replaced
-- rather than overloaded: a second function of five to six parameters would make the calls by
-- position of deployed copies (two to five arguments) ambiguous.
drop function :"schema".acw_notify(text, jsonb, text[], text, text);
create function :"schema".acw_notify(
  p_topic text,
  p_data jsonb,
  p_recipients text[] default '{}',
  p_idempotency_key text default null,
  p_principal text default 'outbox',
  p_options jsonb default '{}'
) returns uuid
language plpgsql
as $$
declare
  v_id uuid := :"schema".acw_uuid_v7();
  v_principal text := coalesce(p_principal, '');
  v_held uuid;
  v_key text;
  v_traceparent text;
  v_tracestate text;
begin
  if p_topic is null or p_topic !~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$' then
    raise exception 'topic: expected lowercase dot-separated words, got %', coalesce(quote_literal(p_topic), 'null')
      using errcode = '22023';
  end if;
  if p_options is not null and jsonb_typeof(p_options) is distinct from 'object' then
    raise exception 'options: expected a JSON object, got %', jsonb_typeof(p_options) using errcode = '22023';
  end if;
  v_key := :"schema".acw_ordering_key(p_options->'ordering_key', 'ordering_key');
  v_traceparent := p_options->>'traceparent';
  v_tracestate := nullif(p_options->>'tracestate', '');
  perform :"schema".acw_check_trace('options.', v_traceparent, v_tracestate);
  perform :"schema".acw_ensure_today();
  if p_idempotency_key is not null then
    select c.event_id into v_held
      from :"schema".acw_claim_keys(v_principal, array[p_idempotency_key], array[v_id]) c where not c.fresh;
  end if;
  if v_held is null then
    insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key, traceparent, tracestate, ordering_key)
    values (v_id, p_topic, coalesce(p_data, 'null'::jsonb), coalesce(p_recipients, '{}'), v_principal, p_idempotency_key,
            v_traceparent, v_tracestate, v_key);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return coalesce(v_held, v_id);
end
$$;

-- Each item may carry `ordering_key`, `traceparent` and `tracestate`, checked before anything is
-- written (the error names events[i]).
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
  v_trace record;
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
  -- Every item's key and trace context checked before anything is written.
  perform :"schema".acw_ordering_key(e.item->'ordering_key', format('events[%s].ordering_key', e.n - 1))
     from jsonb_array_elements(p_events) with ordinality as e(item, n);
  for v_trace in
    select t.n, t.traceparent, nullif(t.tracestate, '') as tracestate
      from rows from (jsonb_to_recordset(p_events) as (traceparent text, tracestate text)) with ordinality as t(traceparent, tracestate, n)
     where t.traceparent is not null or t.tracestate is not null
  loop
    perform :"schema".acw_check_trace(format('events[%s].', v_trace.n - 1), v_trace.traceparent, v_trace.tracestate);
  end loop;
  perform :"schema".acw_ensure_today();
  -- Keys taken (earlier, or by an earlier position of this batch): those positions answer the
  -- event holding the key and write nothing.
  if exists (select 1 from unnest(v_keys) k where k is not null) then
    select array_agg(case when c.fresh is false then c.event_id end order by u.n) into v_held
      from unnest(v_ids) with ordinality as u(id, n)
      left join :"schema".acw_claim_keys(v_principal, v_keys, v_ids) c on c.n = u.n;
  end if;
  insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key, traceparent, tracestate, ordering_key)
  select v_ids[t.n], t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), v_principal, t.idempotency_key,
         t.traceparent, nullif(t.tracestate, ''), t.ordering_key
    from rows from (jsonb_to_recordset(p_events)
                    as (topic text, data jsonb, recipients text[], idempotency_key text, traceparent text, tracestate text, ordering_key text))
         with ordinality as t(topic, data, recipients, idempotency_key, traceparent, tracestate, ordering_key, n)
   where v_held[t.n] is null
   order by t.n;
  if v_held is not null then
    select array_agg(coalesce(v_held[u.n], u.id) order by u.n) into v_ids from unnest(v_ids) with ordinality as u(id, n);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return v_ids;
end
$$;

-- A key blocked behind its dead head (strict endpoints) is an alert (src/admin/alert-actions.ts).
drop index :"schema".audit_log_alerts_idx;
create index audit_log_alerts_idx on :"schema".audit_log (id)
  where action in ('webhook.dead_letter', 'job.dead_letter', 'endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.expired',
                   'endpoint.failing', 'endpoint.failing_resolved', 'topic.event_rejected', 'webhook.key_blocked');

-- Endpoints stored through the API have the setting too (config endpoints: notify.webhook.endpoints[].ordering).
alter table :"schema".endpoints add column ordering text not null default 'relaxed'
  constraint endpoints_ordering_check check (ordering in ('relaxed', 'strict'));
