/**
 * The kinds of alert (docs/operations.md#alerts), alone in a module that imports nothing, so the
 * CLI's `alerts --help` can list them without loading the database code.
 *
 * A new alert kind needs a migration that recreates the partial index audit_log_alerts_idx over the
 * same list, in the same change: a query over an action the index lacks no longer uses it. A test
 * (test/admin/alert-index.test.ts) compares this list with the index in a migrated database.
 */
export const ALERT_ACTIONS = [
  'webhook.dead_letter',
  'job.dead_letter',
  'endpoint.circuit_opened',
  'endpoint.circuit_closed',
  'endpoint.expired',
] as const;
export type AlertAction = (typeof ALERT_ACTIONS)[number];
