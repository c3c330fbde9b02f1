-- Endpoint state shared by every process (docs/operations.md#circuit-breaker): the circuit breaker,
-- pause by hand, and the token bucket of a rate limit. Every claim reads it, so a held endpoint's jobs
-- stay pending (no new job status). One row per endpoint, written only when something changes.
create table :"schema".endpoint_state (
  endpoint             text primary key,
  -- closed: deliveries flow; open: held until next_probe_at; half_open: one probe delivery in flight.
  circuit              text not null default 'closed' check (circuit in ('closed', 'open', 'half_open')),
  -- When the circuit entered its current state.
  circuit_since        timestamptz not null default now(),
  -- When the current outage began (the first open after a close): for the "open too long" alert.
  opened_at            timestamptz,
  next_probe_at        timestamptz,
  -- The current cool-down: the configured one, doubled after each failed probe up to its maximum.
  cooldown_ms          integer,
  probe_job_id         uuid,
  -- A probe still running after this sends the circuit back to open (the attempt timeout plus a margin).
  probe_deadline       timestamptz,
  consecutive_failures integer not null default 0,
  -- The failure-rate window starts at a failure, so a closed endpoint with no failure writes nothing.
  window_started_at    timestamptz,
  window_attempts      integer not null default 0,
  window_failures      integer not null default 0,
  last_error           text,
  last_error_at        timestamptz,
  paused               boolean not null default false,
  paused_at            timestamptz,
  paused_by            text,
  -- Rate limit: tokens left at tokens_at (null: a full bucket).
  tokens               double precision,
  tokens_at            timestamptz,
  -- The audit row of this outage's "open too long" alert; null: not raised (so raised exactly once).
  open_alert_id        bigint,
  updated_at           timestamptz not null default now()
);

-- A failed probe is handed back without spending an attempt; its attempt row says it was a probe.
alter table :"schema".webhook_attempts add column probe boolean not null default false;

-- The start of a job's current series of attempts (insert, retry, redrive, replay): a job still
-- pending notify.webhook.max_age after it goes dead ("endpoint unavailable"). Existing jobs start now.
alter table :"schema".jobs add column series_started_at timestamptz not null default now();

-- Alerts are read by id from audit_log; the index holds every alert action (src/admin/alerts.ts
-- ALERT_ACTIONS lists the same, and a test keeps the two equal).
drop index :"schema".audit_log_alerts_idx;
create index audit_log_alerts_idx on :"schema".audit_log (id)
  where action in ('webhook.dead_letter', 'job.dead_letter', 'endpoint.circuit_opened', 'endpoint.circuit_closed', 'endpoint.expired');
