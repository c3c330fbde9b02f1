-- Endpoints stored through the API choose whether their POSTs carry traceparent/tracestate
-- (docs/operations.md#tracing), as config endpoints do with notify.webhook.endpoints[].propagate_trace.
-- null: follow notify.webhook.propagate_trace, as every stored endpoint did before.
alter table :"schema".endpoints add column propagate_trace boolean;
