/**
 * Topic names and the whitelist grammar used by every endpoint's `topics`:
 * an exact topic, `prefix.*` (one or more further words after `prefix.`), or `*` (everything).
 */

const TOPIC = /^[a-z0-9_]+(\.[a-z0-9_]+)*$/;

/** Lowercase dot-separated words: `workspace.sync_failed`. */
export function isValidTopic(topic: string): boolean {
  return TOPIC.test(topic);
}

/** A whitelist entry: a topic, `<topic>.*`, or `*`. */
export function isValidTopicPattern(pattern: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return isValidTopic(pattern.slice(0, -2));
  return isValidTopic(pattern);
}

/** True when any pattern admits the topic; `a.*` matches `a.b` and `a.b.c` but not `a` or `ab.c`. */
export function topicMatches(patterns: readonly string[], topic: string): boolean {
  for (const p of patterns) {
    if (p === '*' || p === topic) return true;
    // Keeping the dot in the prefix is what stops `a.*` from matching `ab.c` or `a` itself.
    if (p.endsWith('.*') && topic.length > p.length - 1 && topic.startsWith(p.slice(0, -1))) return true;
  }
  return false;
}
