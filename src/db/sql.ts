/** Quote an identifier (a schema or channel name) for SQL text; values always go as parameters. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/** NOTIFY channels are per schema, so two installations sharing a database never wake each other. */
export function channels(schema: string): {
  jobs: string;
  events: string;
  alerts: string;
  users: string;
  endpoints: string;
  endpointDefs: string;
  topics: string;
} {
  // users: a revoked or reissued user's name, so every process forgets its cached tokens (src/admin/users.ts).
  // endpoints: an endpoint whose shared state changed (circuit, pause), so every process re-reads it at once.
  return {
    jobs: `${schema}.acw_jobs`,
    events: `${schema}.acw_events`,
    alerts: `${schema}.acw_alerts`,
    users: `${schema}.acw_users`,
    endpoints: `${schema}.acw_endpoints`,
    // endpointDefs: a stored endpoint was created, changed or deleted, so every process re-reads them.
    endpointDefs: `${schema}.acw_endpoint_defs`,
    // topics: the topic catalog changed, so every process re-reads it.
    topics: `${schema}.acw_topics`,
  };
}
