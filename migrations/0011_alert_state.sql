-- Alerts that carry state and resolve (docs/operations.md#alerts), and endpoints that fail
-- (docs/operations.md#failing-endpoints).

-- The circuit's alert: the outage it stands for may open and close several times (flaps) before
-- it resolves; the deliveries held are counted at each close, the downtime from its first open.
alter table :"schema".endpoint_state
  add column alert_opened_at       timestamptz,
  add column alert_flaps           integer not null default 0,
  add column alert_held            integer not null default 0,
  -- Failing: at least half of a run of circuit.min_attempts attempts failed permanently (4xx other
  -- than 408, 425, 429). The run starts at such a failure, so an endpoint that never gets one writes nothing.
  add column fail_run_attempts     integer not null default 0,
  add column fail_run_permanent    integer not null default 0,
  add column fail_run_codes        integer[] not null default '{}',
  add column failing               boolean not null default false,
  add column failing_since         timestamptz,
  add column failing_codes         integer[] not null default '{}',
  -- Jobs of this endpoint that went dead while it was failing (their admin messages held back).
  add column failing_dead          integer not null default 0,
  add column failing_alert_id      bigint;

-- What became of an alert: resolved (by the alert that says its condition ended, or acknowledged
-- when nothing else resolves it), acknowledged, and how many times its condition began again
-- (flaps). An alert without a row is open and unacknowledged.
create table :"schema".alert_state (
  alert_id        bigint primary key references :"schema".audit_log (id) on delete cascade,
  resolved_at     timestamptz,
  resolved_by     bigint,
  acknowledged_at timestamptz,
  acknowledged_by text,
  flaps           integer not null default 0
);

drop index :"schema".audit_log_alerts_idx;
create index audit_log_alerts_idx on :"schema".audit_log (id)
  where action in ('webhook.dead_letter', 'job.dead_letter', 'endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.expired',
                   'endpoint.failing', 'endpoint.failing_resolved');
