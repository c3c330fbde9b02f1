-- The process registry (docs/operations.md#processes): every `serve` and `worker` process upserts
-- its row every 10 seconds and deletes it when it stops. A row not seen for three beats is shown as
-- gone (a process killed, a host lost); rows gone for an hour are deleted by the processes still
-- running. `last_seen` is the database's clock, so hosts' clocks never matter.
create table :"schema".processes (
  id          text primary key,
  mode        text not null check (mode in ('serve', 'worker')),
  host        text not null,
  pid         integer not null,
  version     text not null,
  -- Runs jobs (outbox pump, workers, runners): false for `serve` with jobs.enabled false.
  jobs        boolean not null,
  started_at  timestamptz not null default now(),
  last_seen   timestamptz not null default now(),
  in_flight   integer not null default 0,
  -- The periodic runners it schedules (cluster ones take their turns in runner_state).
  runners     text[] not null default '{}'
);
-- notify's "is any worker alive" read: the newest row that runs jobs.
create index processes_jobs_seen_idx on :"schema".processes (last_seen) where jobs;
