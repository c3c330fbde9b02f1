import type pg from 'pg';
import { DoublingDelay, Wakeup } from '../delay.js';
import { coerceError } from '../errors.js';
import type { ListenHub, Subscription } from '../db/listen-hub.js';
import type { Logger } from '../log.js';
import { handoverTransaction } from '../queue/handover.js';
import { isExistingJob } from '../queue/transitions.js';
import { fanOut, type FanOutContext, type EventRow } from './fan-out.js';
import { tracing } from '../tracing/runtime.js';
import { screenOutboxEvents, type OutboxCheckContext } from '../topics/outbox-check.js';

/** An event as the pump claims it, with its stored trace context (null: none). */
interface ClaimedEvent extends EventRow {
  traceparent: string | null;
  tracestate: string | null;
}

const BATCH = 200;

/**
 * Fans out events that applications wrote through the outbox (`notify(db, ...)`). Undispatched
 * events are claimed with SKIP LOCKED from a partial index (no high-water mark: transactions
 * commit out of order), woken by the NOTIFY the outbox sends at commit, with a poll as fallback.
 */
export class OutboxPump {
  private listener: Subscription | null = null;
  private stopped = false;
  /** Pending from the start: events written while no pump ran are looked for at once. */
  private readonly wakeup = new Wakeup({ pending: true });
  private loopDone: Promise<void> = Promise.resolve();
  /**
   * Undispatched events may be left in the table of the layout before day partitions (events_v1,
   * migration 0012: written while the service was stopped for the upgrade): drained there first,
   * once. Unknown (null) until the first batch looks.
   */
  private legacy: boolean | null = null;

  constructor(
    private readonly opts: {
      pool: pg.Pool;
      /** The process's LISTEN connection. */
      listenHub: ListenHub;
      channel: string;
      pollMs: number;
      ctx: FanOutContext;
      log: Logger;
      /** Told, once the transaction committed, how many jobs each topic got (metrics). */
      onFannedOut?: (topic: string, jobs: number) => void;
      /** Events are validated against the topic catalog before their fan-out (src/topics/outbox-check.ts). */
      screen?: OutboxCheckContext;
    },
  ) {}

  async start(): Promise<void> {
    this.listener = await this.opts.listenHub.subscribe(this.opts.channel, {
      onNotify: () => this.wake(),
      // Events committed while the connection was down sent a NOTIFY nobody heard.
      onReconnect: () => this.wake(),
    });
    this.loopDone = this.loop();
  }

  wake(): void {
    this.wakeup.wake();
  }

  /** Fan out one batch of undispatched events; returns how many. */
  async pumpBatch(): Promise<number> {
    if (this.legacy === null) {
      const res = await this.opts.pool.query<{ t: string | null }>(`select to_regclass('events_v1')::text as t`);
      this.legacy = res.rows[0]?.t != null;
    }
    if (this.legacy) {
      const n = await this.pumpTable('events_v1');
      if (n === BATCH) return n;
      this.legacy = false;
    }
    return this.pumpTable('event_log');
  }

  private async pumpTable(table: 'event_log' | 'events_v1'): Promise<number> {
    try {
      return await this.pumpOnce(table, false);
    } catch (err) {
      // An event fanned out again while its jobs exist (job ids are fixed per event and endpoint):
      // redo the batch leaving existing jobs alone, rather than fail it on every retry.
      if (!isExistingJob(err)) throw err;
      return this.pumpOnce(table, true);
    }
  }

  private async pumpOnce(table: 'event_log' | 'events_v1', skipExisting: boolean): Promise<number> {
    // The events are already durable (the application's commit): should a database crash lose this
    // commit, the events are undispatched again and the same fan-out is redone, with the same job
    // ids (webhookJobId). So it need not wait for the WAL flush: one fsync less per batch.
    const { ctx } = this.opts;
    let claimed = 0;
    const done = await handoverTransaction(
      this.opts.pool,
      ctx.adopter?.() ?? null,
      async (client, handover) => {
        // Lock and mark in one statement; a rollback undoes the mark with everything else. The
        // older layout's table has no trace context.
        const trace = table === 'event_log' ? 'traceparent, tracestate' : 'null::text as traceparent, null::text as tracestate';
        const res = await client.query<ClaimedEvent>({
          name: `acw_claim_${table}`,
          text: `update ${table} set dispatched_at = now()
          where id = any(array(select id from ${table} where dispatched_at is null order by created_at, id limit $1 for update skip locked))
          returning id, topic, data, recipients, created_at, ${trace}${table === 'event_log' ? ', ordering_key' : ''}`,
          values: [BATCH],
        });
        claimed = res.rows.length;
        if (res.rows.length === 0) return [];
        const traced: EventRow[] = res.rows.map(({ traceparent, tracestate, ...ev }) =>
          traceparent === null ? ev : { ...ev, trace: tracestate === null ? { traceparent } : { traceparent, tracestate } },
        );
        const view = ctx.topics?.();
        const screen = this.opts.screen;
        // The legacy table has no version or rejection columns: its events go out as they did.
        const events = view && screen && table === 'event_log' ? await screenOutboxEvents(client, traced, view, screen) : traced;
        if (events.length === 0) return [];
        const fan = () => fanOut(client, events, ctx, { handover, marked: true, skipExisting, withBody: table !== 'event_log' });
        const t = tracing;
        const results = t
          ? await t.dispatch(
              events.map((e) => e.trace),
              fan,
              (r) => r.reduce((n, x) => n + x.job_ids.length, 0),
            )
          : await fan();
        return events.map((ev, i) => ({ topic: ev.topic, jobs: results[i]?.job_ids.length ?? 0 }));
      },
      { asyncCommit: true },
    );
    for (const d of done) if (d.jobs > 0) this.opts.onFannedOut?.(d.topic, d.jobs);
    return claimed;
  }

  private async loop(): Promise<void> {
    const onError = new DoublingDelay(100, 5_000);
    while (!this.stopped) {
      // Woken, or the poll came round: look either way.
      await this.wakeup.wait(this.opts.pollMs);
      if (this.stopped) break;
      try {
        while (!this.stopped && (await this.pumpBatch()) === BATCH) {
          // A full batch: there may be more.
        }
        onError.reset();
      } catch (err) {
        this.opts.log.warn({ event: 'notify.dispatch_error', err: coerceError(err).message }, 'dispatching events failed; retrying');
        await new Promise((r) => setTimeout(r, onError.next()));
        this.wakeup.wake();
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.listener?.close();
    await this.loopDone;
  }
}
