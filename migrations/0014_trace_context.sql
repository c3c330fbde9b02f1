-- Trace context stored with each event (docs/operations.md#tracing): the W3C traceparent and
-- tracestate of the producer's span, so the delivery attempts, hours later and in another process,
-- link back to the notify that made them. The fan-out copies them into each job's payload, so a
-- claim reads no other table. Both columns are nullable and without a default: adding them
-- rewrites nothing.
alter table :"schema".event_log add column traceparent text, add column tracestate text;

-- A traceparent of version 00 with a trace id and a span id that are not all zeros; null passes.
create function :"schema".acw_check_trace(p_field text, p_traceparent text, p_tracestate text) returns void
language plpgsql immutable
as $$
begin
  if p_traceparent is not null
     and (p_traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
          or substr(p_traceparent, 4, 32) = repeat('0', 32) or substr(p_traceparent, 37, 16) = repeat('0', 16)) then
    raise exception '%traceparent: expected a W3C traceparent like 00-<32 hex>-<16 hex>-01, got %', p_field, quote_literal(left(p_traceparent, 80))
      using errcode = '22023';
  end if;
  if p_tracestate is not null and (p_traceparent is null or length(p_tracestate) > 512) then
    raise exception '%tracestate: expected at most 512 characters, with a traceparent', p_field using errcode = '22023';
  end if;
end
$$;

-- acw_notify gains a sixth parameter, `p_options`, a JSON object of further settings; a caller
-- that passes five (or fewer) arguments by position gets the same function as before. Replaced
-- rather than overloaded: a second function of five to six parameters would make those calls
-- ambiguous. Keys read here: traceparent, tracestate. Other keys are ignored.
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
  v_traceparent := p_options->>'traceparent';
  v_tracestate := nullif(p_options->>'tracestate', '');
  perform :"schema".acw_check_trace('options.', v_traceparent, v_tracestate);
  perform :"schema".acw_ensure_today();
  if p_idempotency_key is not null then
    select c.event_id into v_held
      from :"schema".acw_claim_keys(v_principal, array[p_idempotency_key], array[v_id]) c where not c.fresh;
  end if;
  if v_held is null then
    insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key, traceparent, tracestate)
    values (v_id, p_topic, coalesce(p_data, 'null'::jsonb), coalesce(p_recipients, '{}'), v_principal, p_idempotency_key,
            v_traceparent, v_tracestate);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return coalesce(v_held, v_id);
end
$$;

-- acw_notify_many: each item may carry `traceparent` and `tracestate`, checked as above (the
-- error names events[i]).
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
  insert into :"schema".event_log (id, topic, data, recipients, principal, idempotency_key, traceparent, tracestate)
  select v_ids[t.n], t.topic, coalesce(t.data, 'null'::jsonb), coalesce(t.recipients, '{}'), v_principal, t.idempotency_key,
         t.traceparent, nullif(t.tracestate, '')
    from rows from (jsonb_to_recordset(p_events)
                    as (topic text, data jsonb, recipients text[], idempotency_key text, traceparent text, tracestate text))
         with ordinality as t(topic, data, recipients, idempotency_key, traceparent, tracestate, n)
   where v_held[t.n] is null
   order by t.n;
  if v_held is not null then
    select array_agg(coalesce(v_held[u.n], u.id) order by u.n) into v_ids from unnest(v_ids) with ordinality as u(id, n);
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return v_ids;
end
$$;
