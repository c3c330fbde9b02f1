import { describe, expect, it } from 'vitest';
import { Handover, type JobAdopter } from '../../src/queue/handover.js';
import type { ClaimedJob, NewJob } from '../../src/queue/types.js';

/**
 * Handover's slot accounting alone, against a fake pool that keeps a count of slots in use per
 * endpoint and records every call. No database: what is inserted is stated by calling inserted().
 */

class FakeAdopter implements JobAdopter {
  readonly workerId = 'w-test';
  readonly leaseMs = 30_000;
  readonly inUse = new Map<string | null, number>();
  readonly reserved: string[] = [];
  readonly unreserved: Array<Array<string | null>> = [];
  readonly adopted: string[][] = [];

  constructor(private readonly caps: ReadonlyMap<string | null, number>) {}

  reserve(type: string, endpoint: string | null): boolean {
    this.reserved.push(`${type}:${endpoint}`);
    const used = this.inUse.get(endpoint) ?? 0;
    if (used >= (this.caps.get(endpoint) ?? 0)) return false;
    this.inUse.set(endpoint, used + 1);
    return true;
  }

  unreserve(endpoints: ReadonlyArray<string | null>): void {
    this.unreserved.push([...endpoints]);
    for (const e of endpoints) this.inUse.set(e, (this.inUse.get(e) ?? 0) - 1);
  }

  async adopt(jobs: readonly ClaimedJob[]): Promise<void> {
    // An adopted job keeps the slot reserved for it.
    this.adopted.push(jobs.map((j) => j.id));
  }

  used(): Record<string, number> {
    return Object.fromEntries([...this.inUse].map(([e, n]) => [String(e), n]));
  }
}

const job = (id: string | undefined, endpoint: string | null, delayMs?: number): NewJob => ({
  ...(id === undefined ? {} : { id }),
  type: 'webhook.deliver',
  payload: {},
  maxAttempts: 3,
  endpoint,
  ...(delayMs === undefined ? {} : { delayMs }),
});

/** The row insertJobs reports for a job it inserted as running. */
const claimed = (j: NewJob): ClaimedJob => ({
  id: j.id!,
  type: j.type,
  payload: j.payload,
  attempts: 1,
  maxAttempts: j.maxAttempts,
  leaseToken: `token-${j.id}`,
  leaseExpiresAt: Date.now() + 30_000,
  eventId: null,
  endpoint: j.endpoint ?? null,
  createdAt: new Date(),
  endpointUnknownSince: null,
  skippedTurnsSince: null,
});

describe('Handover accounting', () => {
  it('reserves slots only for the due jobs with ids that the adopter accepts', () => {
    const adopter = new FakeAdopter(
      new Map([
        ['a', 1],
        ['b', 3],
      ]),
    );
    const h = new Handover(adopter);
    const jobs = [job('a1', 'a'), job('a2', 'a'), job('b1', 'b'), job(undefined, 'b'), job('b2', 'b', 5_000), job('b3', 'b')];
    expect(h.reserve(jobs)).toEqual({ workerId: 'w-test', leaseMs: 30_000, ids: new Set(['a1', 'b1', 'b3']) });
    // Neither the job without an id nor the delayed one asks for a slot.
    expect(adopter.reserved).toEqual(['webhook.deliver:a', 'webhook.deliver:a', 'webhook.deliver:b', 'webhook.deliver:b']);
    expect(adopter.used()).toEqual({ a: 1, b: 2 });
  });

  it('holds nothing without an adopter or when the adopter has no room', () => {
    expect(new Handover(null).reserve([job('a1', 'a')])).toBeUndefined();
    const full = new FakeAdopter(new Map());
    const h = new Handover(full);
    expect(h.reserve([job('a1', 'a'), job('n1', null)])).toBeUndefined();
    expect(full.used()).toEqual({});
  });

  it('commit() hands the inserted jobs over and gives back each reservation that got no row', async () => {
    const adopter = new FakeAdopter(
      new Map([
        ['a', 5],
        ['b', 5],
        [null, 5],
      ]),
    );
    const h = new Handover(adopter);
    const jobs = [job('a1', 'a'), job('a2', 'a'), job('a3', 'a'), job('b1', 'b'), job('n1', null)];
    h.reserve(jobs);
    expect(adopter.used()).toEqual({ a: 3, b: 1, null: 1 });
    // Two of a's three jobs existed already (skipExisting), so no row was inserted for them.
    h.inserted([claimed(jobs[0]!), claimed(jobs[3]!), claimed(jobs[4]!)]);
    await h.commit();
    expect(adopter.adopted).toEqual([['a1', 'b1', 'n1']]);
    expect(adopter.unreserved).toEqual([['a', 'a']]);
    expect(adopter.used()).toEqual({ a: 1, b: 1, null: 1 });
    // Settled once: a second commit (or a rollback) hands over and gives back nothing more.
    await h.commit();
    h.rollback();
    expect(adopter.adopted).toHaveLength(1);
    expect(adopter.unreserved).toHaveLength(1);
  });

  it('commit() gives nothing back when every reservation got its row', async () => {
    const adopter = new FakeAdopter(new Map([['a', 2]]));
    const h = new Handover(adopter);
    const jobs = [job('a1', 'a'), job('a2', 'a')];
    h.reserve(jobs);
    h.inserted(jobs.map(claimed));
    await h.commit();
    expect(adopter.adopted).toEqual([['a1', 'a2']]);
    expect(adopter.unreserved).toEqual([]);
    expect(adopter.used()).toEqual({ a: 2 });
  });

  it('rollback() gives back every reservation, inserted or not, and hands nothing over', async () => {
    const adopter = new FakeAdopter(
      new Map([
        ['a', 5],
        ['b', 5],
      ]),
    );
    const h = new Handover(adopter);
    const jobs = [job('a1', 'a'), job('a2', 'a'), job('b1', 'b')];
    h.reserve(jobs);
    h.inserted([claimed(jobs[0]!), claimed(jobs[2]!)]);
    h.rollback();
    expect(adopter.unreserved.map((e) => e.toSorted())).toEqual([['a', 'a', 'b']]);
    expect(adopter.used()).toEqual({ a: 0, b: 0 });
    await h.commit();
    expect(adopter.adopted).toEqual([]);
    expect(adopter.unreserved).toHaveLength(1);
  });
});
