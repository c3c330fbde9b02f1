import { randomFillSync } from 'node:crypto';

/**
 * Ids for events written by the service's own notify: RFC 9562 version 7 UUIDs, 48 bits of Unix
 * milliseconds, then 74 random bits. Ids that grow with time go to the right edge of the indexes
 * that hold them (the events primary key, jobs_event_idx) instead of a random page each, which
 * spared PostgreSQL about 10% of a batch notify's row writes (bench/README.md#http-entry-point).
 * They reveal when the event was made, which its body's `occurred_at` says anyway.
 */

/** Random bytes drawn 4 KiB at a time, as node:crypto's randomUUID does for its own. */
const pool = Buffer.alloc(4096);
let offset = pool.length;

export function newEventId(now: number = Date.now()): string {
  if (offset + 10 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const b = Buffer.allocUnsafe(16);
  b.writeUIntBE(now, 0, 6);
  pool.copy(b, 6, offset, offset + 10);
  offset += 10;
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const x = b.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * The first version 7 id of the millisecond `ms` (its 48 bits of milliseconds, the rest zero): a
 * bound of event_log's day partitions, as acw_uuid_floor makes them in SQL (migration 0012).
 */
export function uuidFloor(ms: number): string {
  const t = Math.max(0, Math.min(2 ** 48 - 1, Math.floor(ms)))
    .toString(16)
    .padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-0000-0000-000000000000`;
}
