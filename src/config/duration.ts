/**
 * Go-style durations (`500ms`, `1h30m`, `1.5s`) and byte sizes (`1mb`, `256kb`).
 * Durations are returned in milliseconds, possibly fractional for `ns`/`us` units.
 */

/** Nanoseconds per unit; BigInt so `1.1h` or `9999h` add up exactly. */
const UNIT_NS: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n, // U+00B5 micro sign, as Go accepts
  'μs': 1_000n, // U+03BC Greek mu, as Go accepts
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const NS_PER_MS = 1_000_000n;

// One `<number><unit>` term; a duration is one or more of them with nothing in between.
const TERM = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

function parseNanos(s: string): bigint | undefined {
  if (s === '0') return 0n; // Go accepts a bare zero, the one unitless value that is unambiguous
  if (s === '') return undefined;
  let total = 0n;
  TERM.lastIndex = 0;
  while (TERM.lastIndex < s.length) {
    const start = TERM.lastIndex;
    const m = TERM.exec(s);
    if (!m || m.index !== start) return undefined;
    const [, num = '', unit = ''] = m;
    const scale = UNIT_NS[unit];
    if (scale === undefined) return undefined;
    const [whole = '', frac = ''] = num.split('.');
    // Fraction digits beyond nanosecond precision cannot matter; cap them to keep BigInt small.
    const digits = frac.slice(0, 18);
    const fracNs = digits === '' ? 0n : (BigInt(digits) * scale) / 10n ** BigInt(digits.length);
    total += BigInt(whole === '' ? '0' : whole) * scale + fracNs;
  }
  return total;
}

function nanosToMs(ns: bigint): number {
  return Number(ns / NS_PER_MS) + Number(ns % NS_PER_MS) / 1e6;
}

/** Milliseconds for a Go-style duration; throws on anything else (no sign, no bare numbers but `0`). */
export function parseDuration(s: string): number {
  const ns = typeof s === 'string' ? parseNanos(s) : undefined;
  if (ns === undefined) throw new RangeError(`expected a duration like "5m", got ${JSON.stringify(s)}`);
  return nanosToMs(ns);
}

/** Go-style text for milliseconds, zero parts left out: 90000 -> "1m30s", 300000 -> "5m". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`cannot format ${ms} ms as a duration`);
  if (ms === 0) return '0s';
  if (ms < 1) {
    const us = ms * 1000;
    return us >= 1 ? `${trim(us)}µs` : `${trim(ms * 1e6)}ns`;
  }
  if (ms < 1000) return `${trim(ms)}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${trim(s)}s` : ''}`;
}

// Up to nanosecond precision without float noise such as 1.5000000000000002.
function trim(n: number): string {
  return String(Number(n.toFixed(6)));
}

const SIZE = /^(\d+(?:\.\d+)?)(b|kb|mb|gb|kib|mib|gib)$/i;
const SIZE_UNIT: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1024,
  kib: 1024,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** Bytes for `512b`, `256kb`, `1mb`, `2GB` (binary units: 1kb = 1024); throws on anything else. */
export function parseSize(s: string): number {
  const m = typeof s === 'string' ? SIZE.exec(s) : null;
  const factor = m ? SIZE_UNIT[(m[2] ?? '').toLowerCase()] : undefined;
  if (!m || factor === undefined) throw new RangeError(`expected a size like "1mb", got ${JSON.stringify(s)}`);
  return Math.round(Number(m[1]) * factor);
}

/** Largest unit that divides exactly: 1048576 -> "1mb", 1536 -> "1536b". */
export function formatSize(bytes: number): string {
  for (const [unit, factor] of [
    ['gb', 1024 ** 3],
    ['mb', 1024 ** 2],
    ['kb', 1024],
  ] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return `${bytes}b`;
}
