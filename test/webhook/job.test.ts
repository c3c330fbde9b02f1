import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildBody, webhookJobId } from '../../src/webhook/job.js';

describe('webhookJobId', () => {
  // Computed by the hand-written SHA-1 derivation this replaced (before the uuid package): a changed
  // id would give a re-dispatched event a new X-ACW-Event-Id, which receivers could not deduplicate.
  it.each([
    ['00000000-0000-4000-8000-000000000001', 'default', '4868883b-1c71-5dff-b45d-83e6b5c46aef'],
    ['5f0c6f1e-2b7a-4e59-9d1c-0c2f4b8e7a31', 'billing-hooks', '36f8c8b4-b2db-5843-af52-3dab82953f3f'],
    ['ffffffff-ffff-4fff-bfff-ffffffffffff', 'a', 'b1b9a937-a00c-5ff2-bb0e-62186757ba99'],
  ])('event %s to endpoint %s is job %s, as before', (eventId, endpoint, jobId) => {
    expect(webhookJobId(eventId, endpoint)).toBe(jobId);
  });

  it('hashes any endpoint name as a Hash object over namespace, event and name does, short or long, ASCII or not', () => {
    const ns = Buffer.from('5b0f0c3e8a9d4c1e9f3a6d2b7e41c0a8', 'hex');
    const eventId = '5f0c6f1e-2b7a-4e59-9d1c-0c2f4b8e7a31';
    const v5 = (name: string): string => {
      const h = createHash('sha1').update(ns).update(`${eventId}\n${name}`, 'utf8').digest();
      h[6] = (h[6]! & 0x0f) | 0x50;
      h[8] = (h[8]! & 0x3f) | 0x80;
      const x = h.toString('hex', 0, 16);
      return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
    };
    // Either side of the one-shot path's scratch buffer (1,024 bytes, names up to ~330 units).
    for (const name of ['e', 'é-ü', '\u{1f4a9}', 'x'.repeat(320), 'x'.repeat(340), 'ü'.repeat(500), 'y'.repeat(2000)]) {
      expect(webhookJobId(eventId, name)).toBe(v5(name));
    }
  });
});

describe('buildBody', () => {
  it('emits event_id, topic, occurred_at (ms, Z), data in that order', () => {
    const body = buildBody({
      id: '7d1c9d8e-2a3b-4c5d-8e9f-0a1b2c3d4e5f',
      topic: 'order.paid',
      occurredAt: new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)),
      data: { b: 1, a: [true, null] },
    });
    expect(body).toBe(
      '{"event_id":"7d1c9d8e-2a3b-4c5d-8e9f-0a1b2c3d4e5f","topic":"order.paid","occurred_at":"2024-01-02T03:04:05.006Z","data":{"b":1,"a":[true,null]}}',
    );
  });

  it('normalises a string occurredAt to UTC with milliseconds', () => {
    const body = buildBody({ id: 'e', topic: 't', occurredAt: '2024-06-01T12:00:00+02:00', data: 1 });
    expect(JSON.parse(body)).toEqual({ event_id: 'e', topic: 't', occurred_at: '2024-06-01T10:00:00.000Z', data: 1 });
  });

  it('keeps the data key when data is undefined (as null)', () => {
    expect(buildBody({ id: 'e', topic: 't', occurredAt: new Date(0), data: undefined })).toContain('"data":null');
  });

  it('rejects an invalid occurredAt', () => {
    expect(() => buildBody({ id: 'e', topic: 't', occurredAt: 'yesterday', data: 1 })).toThrow(RangeError);
  });
});
