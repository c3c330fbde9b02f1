-- The transactional outbox for many events at once (notifyMany in src/outbox.ts): one set-based
-- INSERT and one NOTIFY per batch, where calling acw_notify() once per event cost an INSERT, a
-- lookup and a pg_notify per event. The answer is the same as calling acw_notify() for each event
-- in order: their ids in input order; an idempotency key already taken (by an earlier event, or
-- earlier in the same batch) answers with the event that holds it and writes nothing.
--
-- p_events is a JSON array of {topic, data, recipients?, idempotency_key?} objects (other fields are
-- ignored). A malformed topic fails the whole call, naming events[i] (0-based) and writing nothing.
create function :"schema".acw_notify_many(
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
    select gen_random_uuid() as id, t.n, t.topic, t.data, t.recipients, t.idempotency_key,
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
