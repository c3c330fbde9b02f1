-- The dashboard (docs/operations.md#dashboard): its sessions, and the per-minute delivery counts
-- its charts read.
--
-- Sessions: sign-in trades an API token for a random session id; only its SHA-256 is stored, the
-- cookie holds the id. A session lives until it expires, its user signs out, or its user is revoked
-- or given a new token (the trigger below deletes it).
create table :"schema".sessions (
  id_hash      text primary key,
  user_id      bigint not null references :"schema".users (id) on delete cascade,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null
);
create index sessions_user_idx on :"schema".sessions (user_id);
create index sessions_expires_idx on :"schema".sessions (expires_at);

-- Revoked with the user: a revoke, or a token replaced (a reissue or a new bootstrap token), ends
-- every session the old token opened, whichever code path made the change.
create function :"schema".acw_end_sessions() returns trigger language plpgsql as $$
begin
  delete from :"schema".sessions where user_id = new.id;
  return new;
end
$$;
create trigger users_end_sessions after update of revoked_at, token_hash on :"schema".users
  for each row
  when ((new.revoked_at is not null and old.revoked_at is null) or new.token_hash is distinct from old.token_hash)
  execute function :"schema".acw_end_sessions();

-- Webhook attempts per minute, for the overview's charts (GET /v1/stats): a day of them is at most
-- 1,440 x 64 rows to add up, where counting the attempts themselves reads up to every attempt of the
-- day. One upsert per inserting statement (the outcome writes insert their attempts in batches),
-- keyed by the writing connection's slot, so concurrent writers do not wait on one row. Aborted
-- attempts (a shutdown) say nothing about the receiver and are not counted, as in the endpoints view.
create table :"schema".delivery_counts (
  minute timestamptz not null,
  slot   smallint not null,
  ok     integer not null default 0,
  failed integer not null default 0,
  primary key (minute, slot)
);

create function :"schema".acw_count_deliveries() returns trigger language plpgsql as $$
begin
  insert into :"schema".delivery_counts as c (minute, slot, ok, failed)
  select date_bin('1 minute', a.created_at, timestamptz 'epoch'), pg_backend_pid() % 64,
         count(*) filter (where a.status_code between 200 and 299),
         count(*) filter (where a.status_code is null or a.status_code not between 200 and 299)
    from new_attempts a
   where not a.aborted
   group by 1
   order by 1
  on conflict (minute, slot) do update set ok = c.ok + excluded.ok, failed = c.failed + excluded.failed;
  return null;
end
$$;
create trigger webhook_attempts_count after insert on :"schema".webhook_attempts
  referencing new table as new_attempts
  for each statement execute function :"schema".acw_count_deliveries();

-- The last day's attempts from before this migration, so the charts start full.
insert into :"schema".delivery_counts (minute, slot, ok, failed)
select date_bin('1 minute', created_at, timestamptz 'epoch'), 0,
       count(*) filter (where status_code between 200 and 299),
       count(*) filter (where status_code is null or status_code not between 200 and 299)
  from :"schema".webhook_attempts
 where created_at > now() - interval '25 hours' and not aborted
 group by 1;
