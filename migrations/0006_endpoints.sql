-- Endpoints managed at run time (docs/operations.md#endpoints-at-run-time), besides those in the
-- config file: every process reads this table at start, again on a NOTIFY, and at least every
-- second, so a change reaches all of them within a second without a restart.
create table :"schema".endpoints (
  name          text primary key,
  url           text not null,
  topics        text[] not null default '{}',
  scheme        text not null default 'acw' check (scheme in ('acw', 'standard')),
  headers       jsonb not null default '{}',
  -- null: the notify.webhook default of the process.
  timeout_ms    integer,
  max_in_flight integer,
  -- As given ("20/s", "600/min"); null: the notify.webhook default.
  rate_limit    text,
  enabled       boolean not null default true,
  description   text not null default '',
  -- Encrypted at rest (src/crypto): "<version>:<key id>:<iv, tag and ciphertext>"; never returned after creation.
  secret        text not null,
  -- A rotation's overlap (docs/operations.md#secret-rotation): the new secret signs beside the old until rotate_until.
  secret_next   text,
  rotate_until  timestamptz,
  -- The principal that created it: a service sees and changes only its own.
  owner         text not null,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  -- Deleted: the name stays reserved (a tombstone) for jobs.job_purge.dead_retention, so old jobs still
  -- say where they went; the purge removes it after that.
  deleted_at    timestamptz
);
create index endpoints_deleted_idx on :"schema".endpoints (deleted_at) where deleted_at is not null;

-- A replay's idempotency key is looked up among that endpoint's replay audit rows (src/admin/replay.ts).
create index audit_log_replay_idx on :"schema".audit_log (target_id, id) where action = 'endpoint.replay';
