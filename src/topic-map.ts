/**
 * Any topic, any data: what the client and `notify(db, …)` check without a topic map. With the
 * `Topics` map `acw-webhooks topics types` prints (docs/integrate.md#typed-topics) as their type
 * parameter, a topic not in it, or data not of its type, is a compile error. No import: the client
 * and the outbox both take it, as a type only.
 */
export interface AnyTopics {
  [topic: string]: unknown;
}
