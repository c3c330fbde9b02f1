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

-- The outbox functions read the context from their callers in migration 0016, which gives
-- acw_notify the options argument that carries it (and the ordering key).
