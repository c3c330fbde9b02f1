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
  'endpoint.failing',
  'endpoint.failing_resolved',
  'topic.event_rejected',
  'webhook.key_blocked',
] as const;
export type AlertAction = (typeof ALERT_ACTIONS)[number];

/** Alerts about a condition that lasts: open until the alert that says it ended resolves them (acknowledging does not). */
export const CONDITION_ACTIONS: readonly AlertAction[] = ['endpoint.circuit_opened', 'endpoint.failing'];
/** Alerts that say a condition ended: resolved from the start. Every other alert resolves when acknowledged. */
export const RESOLUTION_ACTIONS: readonly AlertAction[] = ['endpoint.circuit_closed', 'endpoint.failing_resolved'];
