import { createHash } from 'node:crypto';
import type pg from 'pg';
import { ApiError } from '../errors.js';
import { handoverTransaction, type Handover } from '../queue/handover.js';
import { fanOut, type FanOutContext, type FanOutResult, type EventRow } from './fan-out.js';
import { canonicalJson } from './canonical-json.js';
import type { NotifyInput } from './input.js';

export interface NotifyAnswer {
  /** 202 accepted now; 200 the same idempotency key again: the first answer, nothing written. */
  status: 200 | 202;
  body: FanOutResult;
}

function requestHash(input: NotifyInput): string {
  return createHash('sha256')
    .update(canonicalJson([input.topic, input.data, input.recipients ?? []]))
    .digest('hex');
}

async function notifyOne(
  client: pg.ClientBase,
  input: NotifyInput,
  principal: string,
  ctx: FanOutContext,
  path: string,
  handover: Handover,
): Promise<NotifyAnswer> {
  const recipients = input.recipients ?? [];
  if (recipients.length > 0) {
    const res = await client.query<{ name: string }>(
      `select n as name from unnest($1::text[]) n where not exists (select 1 from users u where u.name = n and u.revoked_at is null)`,
      [recipients],
    );
    if (res.rows.length > 0) {
      const names = res.rows.map((r) => r.name);
      throw new ApiError(400, 'unknown_recipients', `${path}recipients: no such user: ${names.join(', ')}`, {
        field: `${path}recipients`,
        names,
      });
    }
  }
  const hash = requestHash(input);
  const ins = await client.query<{ id: string; created_at: Date }>(
    `insert into events (topic, data, recipients, principal, idempotency_key, request_hash)
     values ($1, $2::jsonb, $3, $4, $5, $6)
     on conflict (principal, idempotency_key) do nothing
     returning id, created_at`,
    [input.topic, JSON.stringify(input.data), recipients, principal, input.idempotency_key ?? null, hash],
  );
  const row = ins.rows[0];
  if (!row) {
    // The key was used before (a concurrent first use waited for us on the unique index).
    const prev = await client.query<{ request_hash: string | null; response: FanOutResult | null }>(
      `select request_hash, response from events where principal = $1 and idempotency_key = $2`,
      [principal, input.idempotency_key],
    );
    const p = prev.rows[0];
    if (!p || p.request_hash !== hash || !p.response) {
      throw new ApiError(409, 'idempotency_conflict', `${path}idempotency_key: already used with a different request`, {
        field: `${path}idempotency_key`,
      });
    }
    return { status: 200, body: p.response };
  }
  const ev: EventRow = { id: row.id, topic: input.topic, data: input.data, recipients, created_at: row.created_at };
  const [result] = await fanOut(client, [ev], ctx, { handover });
  await client.query(`update events set response = $2::jsonb where id = $1`, [row.id, JSON.stringify(result)]);
  return { status: 202, body: result! };
}

/** Deadlock and serialization failures are the database asking for the transaction again. */
async function retryingTransaction<T>(pool: pg.Pool, ctx: FanOutContext, fn: (client: pg.PoolClient, h: Handover) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await handoverTransaction(pool, ctx.adopter?.() ?? null, fn);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 3 || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}

/** The service's own notify (HTTP route, CLI): insert and fan out at once, in one transaction. */
export async function notifyNow(pool: pg.Pool, input: NotifyInput, principal: string, ctx: FanOutContext): Promise<NotifyAnswer> {
  return retryingTransaction(pool, ctx, (client, h) => notifyOne(client, input, principal, ctx, '', h));
}

/** All or nothing: every event of the batch, or none of them. */
export async function notifyBatchNow(
  pool: pg.Pool,
  inputs: readonly NotifyInput[],
  principal: string,
  ctx: FanOutContext,
): Promise<NotifyAnswer[]> {
  // Keys are taken in one order by every batch, so two batches sharing keys cannot deadlock.
  const order = [...inputs.keys()].toSorted((a, b) => (inputs[a]!.idempotency_key ?? '').localeCompare(inputs[b]!.idempotency_key ?? ''));
  return retryingTransaction(pool, ctx, async (client, h) => {
    const byIndex = new Map<number, NotifyAnswer>();
    for (const i of order) byIndex.set(i, await notifyOne(client, inputs[i]!, principal, ctx, `events[${i}].`, h));
    return inputs.map((_, i) => byIndex.get(i)!);
  });
}
