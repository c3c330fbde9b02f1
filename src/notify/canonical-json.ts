// No imports: the testing client (src/testing.ts) can hash a request the way the service does.

/**
 * JSON with every object's keys sorted, at any depth: the same data sent with its keys in another
 * order is the same request. Arrays keep their order (it is part of the data).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).toSorted(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
