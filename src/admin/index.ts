/** Operator operations shared by the HTTP API and the CLI: plain functions over a pool, no HTTP types. */
export {
  listJobs,
  getJob,
  retryJob,
  cancelJob,
  redriveJobs,
  JOB_STATUSES,
  type JobView,
  type AttemptView,
  type JobFilter,
  type RedriveFilter,
} from './jobs.js';
export { addUser, listUsers, revokeUser, authenticate, type Principal, type UserView } from './users.js';
export {
  readAlerts,
  listAlerts,
  followAlerts,
  pumpAlerts,
  latestAlertId,
  parseAlertActions,
  ALERT_ACTIONS,
  type AlertAction,
  type AlertView,
  type FollowOptions,
} from './alerts.js';
export { endpointHealth, type EndpointHealth } from '../endpoint-state/health.js';
export { testEndpoint, TEST_TOPIC } from './test-delivery.js';
export { listInboxMessages, markInboxMessageRead, type InboxMessageView } from './inbox.js';
