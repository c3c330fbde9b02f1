import { describe, expect, it } from 'vitest';
import { CLAIM_MAX, SlotBudget } from '../../src/queue/slots.js';

describe('SlotBudget', () => {
  it('keeps deliveries and application jobs in budgets of their own', () => {
    const b = new SlotBudget({ workers: 2, deliveries: 3, caps: () => new Map([['a', 10]]) });
    b.take(null);
    b.take(null);
    // Application handlers are full; deliveries still have room.
    expect(b.reserve(null)).toBe(false);
    expect(b.reserve('a')).toBe(true);
    expect(b.reserve('a')).toBe(true);
    expect(b.reserve('a')).toBe(true);
    expect(b.reserve('a')).toBe(false);
    b.drop(null);
    expect(b.reserve(null)).toBe(true);
  });

  it('without a delivery budget, every job shares the workers (a bare WorkerPool)', () => {
    const b = new SlotBudget({ workers: 2, caps: () => new Map([['a', 10]]) });
    expect(b.reserve('a')).toBe(true);
    expect(b.reserve(null)).toBe(true);
    expect(b.reserve('a')).toBe(false);
    expect(b.beginClaim([]).total).toBe(0);
  });

  it('a claim takes at most CLAIM_MAX, each endpoint at most its free slots and a cap ahead', () => {
    const b = new SlotBudget({
      workers: 32,
      deliveries: 2000,
      caps: () =>
        new Map([
          ['a', 16],
          ['b', 1000],
        ]),
    });
    for (let i = 0; i < 10; i++) b.take('a');
    const plan = b.beginClaim(['stranger']);
    expect(plan.deliveries).toBe(CLAIM_MAX);
    expect(plan.workers).toBe(32);
    expect(plan.total).toBe(CLAIM_MAX);
    // a: 6 free slots and a cap (16) ahead; b: bounded by the claim.
    expect(plan.endpoints).toEqual(
      new Map([
        ['a', 22],
        ['b', CLAIM_MAX],
        ['stranger', CLAIM_MAX],
      ]),
    );
  });

  it('claims ahead: jobs past the free slots wait here, leased, up to a cap per endpoint and a budget in all', () => {
    const b = new SlotBudget({ workers: 1, deliveries: 20, caps: () => new Map([['a', 4]]) });
    for (let i = 0; i < 4; i++) b.take('a');
    expect(b.canStart('a')).toBe(false);
    // No free slot, but a cap's worth ahead.
    expect(b.beginClaim([]).endpoints?.get('a')).toBe(4);
    b.endClaim();
    for (let i = 0; i < 3; i++) b.queue('a');
    expect(b.waiting('a')).toBe(3);
    expect(b.beginClaim([]).endpoints?.get('a')).toBe(1);
    b.endClaim();
    // A delivery waiting here goes before a fresh one: no reservation (claim on dispatch) meanwhile.
    b.drop('a');
    expect(b.canStart('a')).toBe(true);
    expect(b.reserve('a')).toBe(false);
    b.dequeue('a');
    b.take('a');
    expect(b.waiting('a')).toBe(2);
  });

  it('a held endpoint is offered nothing ahead and starts nothing', () => {
    let held = false;
    const b = new SlotBudget({ workers: 1, deliveries: 20, caps: () => new Map([['a', 4]]), held: () => held });
    expect(b.canStart('a')).toBe(true);
    held = true;
    expect(b.canStart('a')).toBe(false);
    expect(b.beginClaim([]).endpoints?.has('a')).toBe(false);
  });

  it('a reservation stays off the slots a claim under way may fill', () => {
    const b = new SlotBudget({ workers: 1, deliveries: 4, caps: () => new Map([['a', 4]]) });
    b.beginClaim([]);
    expect(b.reserve('a')).toBe(false);
    b.endClaim();
    expect(b.reserve('a')).toBe(true);
  });

  it('degraded endpoints together hold at most half of the delivery budget', () => {
    const caps = new Map([
      ['bad1', 8],
      ['bad2', 8],
      ['good', 8],
    ]);
    const b = new SlotBudget({ workers: 1, deliveries: 10, caps: () => caps, degraded: (ep) => ep.startsWith('bad') });
    const plan = b.beginClaim([]);
    const offered = (plan.endpoints?.get('bad1') ?? 0) + (plan.endpoints?.get('bad2') ?? 0);
    expect(offered).toBeLessThanOrEqual(5);
    expect(plan.endpoints?.get('bad1')).toBeGreaterThan(0);
    expect(plan.endpoints?.get('bad2')).toBeGreaterThan(0);
    // A healthy one: its free slots and a cap ahead.
    expect(plan.endpoints?.get('good')).toBe(16);
    b.endClaim();
    for (let i = 0; i < 5; i++) expect(b.reserve(i % 2 ? 'bad1' : 'bad2')).toBe(true);
    expect(b.reserve('bad1')).toBe(false);
    expect(b.reserve('good')).toBe(true);
    b.drop('bad1');
    expect(b.reserve('bad2')).toBe(true);
  });

  it('shares the degraded half evenly, so idle degraded endpoints cannot starve one with a backlog', () => {
    const caps = new Map([
      ['a', 8],
      ['b', 8],
      ['c', 8],
    ]);
    const b = new SlotBudget({ workers: 1, deliveries: 32, caps: () => caps, degraded: () => true });
    const plan = b.beginClaim([]);
    // Half of 32 is 16, shared by three: each is offered something, C included.
    expect([...plan.endpoints!.values()]).toEqual([5, 5, 5]);
  });
});
