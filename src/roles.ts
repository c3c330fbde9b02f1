/**
 * The roles of API users, listed once (docs/operations.md#authentication): the config schema, the
 * users admin, the route registry, the answers' schemas (and through them the client's and the
 * dashboard's types) take them from here. No import: the dashboard and the client can use it too.
 * (migrations/0001_core.sql's check constraint lists them as well: a released migration is not
 * edited; test/http/contract.test.ts compares it with this list.)
 */
export const ROLES = ['admin', 'viewer', 'service'] as const;
export type Role = (typeof ROLES)[number];

/** Who may call what: each route of src/http/contract/routes.ts names one of these lists. */
export const ACCESS = {
  /** The operator views (jobs, stats, processes, alerts) and the dashboard's sign-in. */
  read: ['viewer', 'admin'],
  /** Sending events. */
  notify: ['service', 'admin'],
  /** The operator's actions. */
  admin: ['admin'],
  /** Reading endpoints: a service sees the ones it created. */
  readEndpoints: ['viewer', 'admin', 'service'],
  /** Creating, changing and deleting stored endpoints: a service its own, within its granted topics. */
  manageEndpoints: ['admin', 'service'],
} as const satisfies Record<string, readonly Role[]>;
