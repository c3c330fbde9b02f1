-- Core tables of acw-webhooks. Before the file runs, src/db/migrate.ts replaces `:"schema"` with the
-- configured database.schema as a quoted identifier and `:'schema'` with it as a string literal.

create table :"schema".jobs (
  id               uuid primary key default gen_random_uuid(),
  type             text not null,
  payload          jsonb not null default '{}',
  status           text not null default 'pending'
                   check (status in ('pending', 'running', 'completed', 'dead', 'cancelled')),
  attempts         integer not null default 0,
  max_attempts     integer not null default 6 check (max_attempts >= 1),
  run_at           timestamptz not null default now(),
  locked_by        text,
  lease_token      uuid,
  lease_expires_at timestamptz,
  last_error       text,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  completed_at     timestamptz,
  event_id         uuid,
  endpoint         text,
  -- When a webhook job first found its endpoint unknown or disabled; dead after 24 h of that.
  parked_since     timestamptz
);
-- The claim reads only this partial index: its cost stays flat however many finished rows pile up.
create index jobs_due_idx on :"schema".jobs (run_at, id) where status = 'pending';
-- Webhook claims read each endpoint's own range, so an endpoint at its max_in_flight cap is skipped
-- without walking its backlog; jobs with no endpoint (an application's own types) have theirs.
create index jobs_due_endpoint_idx on :"schema".jobs (endpoint, run_at, id) where status = 'pending';
create index jobs_due_unkeyed_idx on :"schema".jobs (run_at, id) where status = 'pending' and endpoint is null;
create index jobs_lease_idx on :"schema".jobs (lease_expires_at) where status = 'running';
create index jobs_completed_idx on :"schema".jobs (completed_at) where status = 'completed';
create index jobs_finished_idx on :"schema".jobs (updated_at) where status in ('dead', 'cancelled');
create index jobs_event_idx on :"schema".jobs (event_id) where event_id is not null;

create table :"schema".webhook_attempts (
  id            bigint generated always as identity primary key,
  job_id        uuid not null,
  attempt       integer not null,
  -- The claim the attempt was made under: a retried write of the same outcome adds no second row.
  lease_token   uuid not null default gen_random_uuid(),
  endpoint      text,
  status_code   integer,
  error_kind    text,
  error         text,
  duration_ms   integer not null,
  response_body text,
  lease_lost    boolean not null default false,
  aborted       boolean not null default false,
  created_at    timestamptz not null default now()
);
create unique index webhook_attempts_claim_idx on :"schema".webhook_attempts (job_id, lease_token);

create table :"schema".events (
  id              uuid primary key default gen_random_uuid(),
  topic           text not null check (topic ~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$'),
  data            jsonb not null,
  recipients      text[] not null default '{}',
  principal       text not null default '',
  idempotency_key text,
  request_hash    text,
  response        jsonb,
  dispatched_at   timestamptz,
  created_at      timestamptz not null default now(),
  unique (principal, idempotency_key)
);
create index events_undispatched_idx on :"schema".events (created_at, id) where dispatched_at is null;
create index events_dispatched_idx on :"schema".events (created_at) where dispatched_at is not null;

create table :"schema".users (
  id         bigint generated always as identity primary key,
  name       text not null unique,
  role       text not null check (role in ('admin', 'viewer', 'service')),
  token_hash text unique,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);

create table :"schema".notifications (
  id         bigint generated always as identity primary key,
  user_id    bigint not null references :"schema".users (id) on delete cascade,
  topic      text not null,
  data       jsonb not null default '{}',
  event_id   uuid,
  read_at    timestamptz,
  created_at timestamptz not null default now()
);
create index notifications_user_idx on :"schema".notifications (user_id, id desc);
create index notifications_read_idx on :"schema".notifications (read_at) where read_at is not null;

create table :"schema".audit_log (
  id          bigint generated always as identity primary key,
  action      text not null,
  actor       text,
  target_type text,
  target_id   text,
  details     jsonb not null default '{}',
  created_at  timestamptz not null default now()
);

create table :"schema".runner_state (
  name        text primary key,
  last_run_at timestamptz not null default '-infinity'
);

-- The transactional outbox: applications call this inside their own transaction, so the event
-- exists exactly when their change commits. The dispatcher, woken by the NOTIFY (delivered only
-- at commit), fans it out to jobs and in-app notifications against its own config.
create function :"schema".acw_notify(
  p_topic text,
  p_data jsonb,
  p_recipients text[] default '{}',
  p_idempotency_key text default null,
  p_principal text default 'outbox'
) returns uuid
language plpgsql
as $$
declare
  v_id uuid;
begin
  if p_topic is null or p_topic !~ '^[a-z0-9_]+(\.[a-z0-9_]+)*$' then
    raise exception 'topic: expected lowercase dot-separated words, got %', coalesce(quote_literal(p_topic), 'null')
      using errcode = '22023';
  end if;
  insert into :"schema".events (topic, data, recipients, principal, idempotency_key)
  values (p_topic, coalesce(p_data, 'null'::jsonb), coalesce(p_recipients, '{}'), coalesce(p_principal, ''), p_idempotency_key)
  on conflict (principal, idempotency_key) do nothing
  returning id into v_id;
  if v_id is null then
    select id into v_id from :"schema".events
     where principal = coalesce(p_principal, '') and idempotency_key = p_idempotency_key;
  end if;
  perform pg_notify(:'schema' || '.acw_events', '');
  return v_id;
end
$$;
