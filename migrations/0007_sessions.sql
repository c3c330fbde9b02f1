-- Dashboard sessions (docs/operations.md#dashboard): sign-in trades an API token for a random
-- session id; only its SHA-256 is stored, the cookie holds the id. A session lives until it expires,
-- its user signs out, or its user is revoked or given a new token (the trigger below deletes it).
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

-- The overview's delivery charts count attempts by minute over the last 24 h: a range scan of this
-- index (the columns the counts need included) instead of the whole table.
create index webhook_attempts_created_idx on :"schema".webhook_attempts (created_at) include (status_code, error_kind);
