-- Indexes for the operator API and CLI (GET /v1/jobs, jobs list): listing jobs newest first, filtered by status,
-- endpoint or event id; endpoint health over recent attempts; replaying dead-letter alerts.
-- Kept few and narrow: every index on jobs is written on each claim and outcome.

-- GET /v1/jobs without filters (and with topic/type, which filter this scan), newest first.
create index jobs_created_idx on :"schema".jobs (created_at, id);
-- status=dead lists and redrives; partial, so only the dead transition writes to it.
create index jobs_dead_created_idx on :"schema".jobs (created_at, id) where status = 'dead';
-- endpoint=NAME lists, newest first.
create index jobs_endpoint_created_idx on :"schema".jobs (endpoint, created_at, id) where endpoint is not null;

-- GET /v1/endpoints: attempts of the last hour per endpoint.
create index webhook_attempts_endpoint_idx on :"schema".webhook_attempts (endpoint, created_at);

-- Alerts (SSE, `alerts --follow`) read dead-letter rows after an id: only those rows are indexed.
create index audit_log_alerts_idx on :"schema".audit_log (id) where action in ('webhook.dead_letter', 'job.dead_letter');
