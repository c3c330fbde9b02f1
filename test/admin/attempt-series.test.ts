// A job's attempts across the series an operator starts (retry, redrive, endpoint replay): each
// numbered once, each placed in its series, read from the attempt numbers alone
// (docs/operations.md#replaying-an-endpoint).
import { describe, expect, it } from 'vitest';
import { placeAttempts, type AttemptRow } from '../../src/admin/job-view.js';

const row = (attempt: number, more: Partial<AttemptRow> = {}): AttemptRow => ({
  attempt,
  status_code: 503,
  error_kind: 'http_5xx',
  error: null,
  duration_ms: 1,
  response_body: null,
  lease_lost: false,
  aborted: false,
  created_at: new Date(0),
  probe: false,
  ...more,
});
const placed = (rows: AttemptRow[]) => placeAttempts(rows).map((a) => [a.number, a.series, a.attempt]);

describe('placeAttempts', () => {
  it('a replay after one attempt: 1 and 2, the second in series 1 (not two attempts "1")', () => {
    expect(placed([row(1, { status_code: 410 }), row(1, { status_code: 200 })])).toEqual([
      [1, 0, 1],
      [2, 1, 1],
    ]);
  });

  it('a series starts wherever the number goes down', () => {
    expect(placed([row(1), row(2), row(3), row(1), row(2), row(1)])).toEqual([
      [1, 0, 1],
      [2, 0, 2],
      [3, 0, 3],
      [4, 1, 1],
      [5, 1, 2],
      [6, 2, 1],
    ]);
  });

  it('a failed probe or an aborted attempt gives its number back: the next attempt repeats it in the same series', () => {
    expect(placed([row(1, { probe: true, status_code: null }), row(1), row(2, { aborted: true }), row(2)])).toEqual([
      [1, 0, 1],
      [2, 0, 1],
      [3, 0, 2],
      [4, 0, 2],
    ]);
    // A probe that succeeded completed the job: a 1 after it is a new series.
    expect(placed([row(1, { probe: true, status_code: 204 }), row(1)])).toEqual([
      [1, 0, 1],
      [2, 1, 1],
    ]);
  });

  it('never shows the probe flag, and gives ISO times', () => {
    const [a] = placeAttempts([row(1, { probe: true })]);
    expect(a).not.toHaveProperty('probe');
    expect(a!.created_at).toBe('1970-01-01T00:00:00.000Z');
  });
});
