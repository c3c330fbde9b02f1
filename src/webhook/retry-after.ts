// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date in any of the three formats that
// recipients must accept (§5.6.7). Parsed by hand: Date.parse accepts junk such as "1" or "soon 2030".

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MON = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// Sun, 06 Nov 1994 08:49:37 GMT
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MON} (\\d{4}) ${TIME} GMT$`, 'i');
// Sunday, 06-Nov-94 08:49:37 GMT
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MON}-(\\d{2}) ${TIME} GMT$`, 'i');
// Sun Nov  6 08:49:37 1994
const ASCTIME = new RegExp(`^${DAY} ${MON} ([ \\d]\\d) ${TIME} (\\d{4})$`, 'i');

/**
 * Milliseconds from `now` that a `Retry-After` value asks us to wait: delta-seconds or an HTTP
 * date; a date in the past gives 0; anything unparseable gives null.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number = Date.now()): number | null {
  // A repeated header is invalid unless every copy agrees.
  const raw = Array.isArray(value) ? (new Set(value.map((v) => v.trim())).size === 1 ? value[0] : undefined) : value;
  if (raw === undefined) return null;
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, Number.MAX_SAFE_INTEGER);
  const at = parseHttpDate(text, now);
  if (at === null) return null;
  return Math.max(0, at - now);
}

/** An HTTP-date as epoch milliseconds, or null. */
export function parseHttpDate(text: string, now: number = Date.now()): number | null {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(m[3], m[2], m[1], m[4], m[5], m[6]);
  m = RFC850.exec(text);
  if (m) {
    // Two-digit years: a year more than 50 years ahead is in the previous century (RFC 9110 §5.6.7).
    const nowYear = new Date(now).getUTCFullYear();
    let year = 2000 + Number(m[3]);
    if (year > nowYear + 50) year -= 100;
    return utc(String(year), m[2], m[1], m[4], m[5], m[6]);
  }
  m = ASCTIME.exec(text);
  if (m) return utc(m[6], m[1], m[2], m[3], m[4], m[5]);
  return null;
}

function utc(
  year: string | undefined,
  month: string | undefined,
  day: string | undefined,
  hour: string | undefined,
  minute: string | undefined,
  second: string | undefined,
): number | null {
  const mi = MONTHS.indexOf((month ?? '').toLowerCase());
  const [y, d, h, min, s] = [year, day, hour, minute, second].map((v) => Number((v ?? '').trim()));
  if (mi < 0 || y === undefined || d === undefined || h === undefined || min === undefined || s === undefined) return null;
  if (d < 1 || d > 31 || h > 23 || min > 59 || s > 60) return null;
  const ms = Date.UTC(y, mi, d, h, min, Math.min(s, 59));
  // Reject impossible days such as 31 Feb, which Date.UTC would roll into March.
  if (new Date(ms).getUTCDate() !== d) return null;
  return ms;
}
