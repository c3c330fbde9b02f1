-- The topic catalog (docs/operations.md#topic-catalog): each topic with a description, its flags, and
-- its JSON Schemas, one row per version. A schema is never edited: a change adds a version, and an
-- event records the version it was validated against, so old events keep theirs.

create table :"schema".topics (
  name             text primary key,
  description      text not null default '',
  deprecated       boolean not null default false,
  deprecation_note text not null default '',
  -- Instead of deleting a topic that history refers to: no longer offered, its versions kept.
  archived         boolean not null default false,
  -- This topic's validation mode; null: topics.validation.
  validation       text check (validation in ('off', 'warn', 'enforce')),
  -- 'config': declared under topics.catalog, written at start; 'api': through /v1/topics or the CLI.
  source           text not null default 'api' check (source in ('api', 'config')),
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default clock_timestamp()
);

create table :"schema".topic_versions (
  topic      text not null references :"schema".topics (name),
  version    integer not null check (version > 0),
  -- json, not jsonb: kept as written, members in the author's order (the generated types and docs follow it).
  schema     json not null,
  examples   json not null default '[]',
  created_by text not null,
  created_at timestamptz not null default now(),
  primary key (topic, version)
);

-- The schema version an event was validated against (null: none, its topic has no schema), and
-- why the dispatcher refused an outbox event under validation enforce (it then has no job).
alter table :"schema".event_log
  add column schema_version integer,
  add column rejected       text;

-- A new kind of alert, topic.event_rejected: an outbox event refused at dispatch under validation
-- enforce. The alerts' partial index lists every kind (src/admin/alert-actions.ts).
drop index :"schema".audit_log_alerts_idx;
create index audit_log_alerts_idx on :"schema".audit_log (id)
  where action in ('webhook.dead_letter', 'job.dead_letter', 'endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.expired',
                   'endpoint.failing', 'endpoint.failing_resolved', 'topic.event_rejected');
