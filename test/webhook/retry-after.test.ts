import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/webhook/retry-after.js';

const NOW = Date.UTC(2024, 10, 6, 8, 49, 37);

describe('parseRetryAfter', () => {
  it.each([
    ['0', 0],
    ['120', 120_000],
    [' 7 ', 7_000],
  ])('reads delta-seconds %j as milliseconds', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms);
  });

  it('reads an IMF-fixdate relative to now', () => {
    expect(parseRetryAfter('Wed, 06 Nov 2024 08:50:07 GMT', NOW)).toBe(30_000);
  });

  it('reads the obsolete RFC 850 and asctime date formats', () => {
    expect(parseRetryAfter('Wednesday, 06-Nov-24 08:51:37 GMT', NOW)).toBe(120_000);
    expect(parseRetryAfter('Wed Nov  6 08:49:47 2024', NOW)).toBe(10_000);
  });

  it('gives 0 for a date in the past', () => {
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', NOW)).toBe(0);
  });

  it('uses a repeated header only when every copy agrees', () => {
    expect(parseRetryAfter(['5', '5'], NOW)).toBe(5_000);
    expect(parseRetryAfter(['5', '6'], NOW)).toBeNull();
  });

  it.each([
    undefined,
    '',
    'soon',
    '-1',
    '1.5',
    '1e3',
    '0x10',
    'Wed, 31 Feb 2024 08:50:07 GMT',
    'Wed, 06 Nov 2024 25:00:00 GMT',
    '2024-11-06T08:50:07Z',
  ])('returns null for garbage %j', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeNull();
  });

  it('defaults now to the current time', () => {
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    const ms = parseRetryAfter(inAMinute);
    expect(ms).toBeGreaterThan(58_000);
    expect(ms).toBeLessThanOrEqual(60_000);
  });
});
