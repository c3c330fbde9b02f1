/** "Did you mean" for unknown config keys. */

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

// `maxInFlight`, `Max-In-Flight` and `max_in_flight` are the same key to a human.
function normalise(key: string): string {
  return key.toLowerCase().replaceAll(/[-_]/g, '');
}

/** The closest known key: same letters ignoring case and `-`/`_`, else within edit distance 2. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  const norm = normalise(key);
  const same = known.find((k) => normalise(k) === norm);
  if (same !== undefined) return same;
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = levenshtein(key.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}
