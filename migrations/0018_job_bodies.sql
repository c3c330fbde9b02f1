-- A webhook job of an event in event_log carries no body (docs/architecture.md#bodies-by-reference).
--
-- Until now every `webhook.deliver` job kept its delivery body, the event's data once more, in its
-- payload: written into job_queue at fan-out, copied into job_history when it finished. From here
-- a job of an event in event_log (a version 7 id) keeps only its topic (and schema version, trace
-- context); its claim reads the event by primary key and the worker makes the body from it, the
-- same bytes at every attempt. Jobs written before keep their bodies and send them.
--
-- Nothing changes in the tables. A process of an older version would claim a job without a body
-- and send nothing (it would call it a malformed job and make it dead at once): refuse while one
-- runs.
do $$
declare
  v_live text;
begin
  select string_agg(format('%s (%s, last seen %s s ago)', id, mode, round(extract(epoch from now() - last_seen))), ', ' order by id)
    into v_live
    from :"schema".processes
   where last_seen > now() - interval '30 seconds' and coalesce(layout, 0) < 4;
  if v_live is not null then
    raise exception 'migration 0018_job_bodies changes what a webhook job carries and cannot run while processes of an older version are running: %. Stop them, or wait 30 seconds after they were killed, then run it again (docs/operations.md#upgrading)', v_live
      using errcode = '55000';
  end if;
end
$$;
