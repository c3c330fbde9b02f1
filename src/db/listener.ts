import pg from 'pg';
import { DoublingDelay } from '../delay.js';
import type { Logger } from '../log.js';
import { quoteIdent } from './sql.js';

/**
 * A LISTEN connection of its own, outside the pool (LISTEN needs a real session, so not through
 * PgBouncer in transaction mode). When the connection drops it reconnects with back-off and then
 * calls `onReconnect`: notifications sent meanwhile are gone, so the owner must poll at once.
 */
export interface ListenerOptions {
  url: string;
  channels: readonly string[];
  onNotify: (channel: string, payload: string | undefined) => void;
  onReconnect?: () => void;
  log?: Logger;
  /** Back-off bounds for reconnecting, ms. */
  minDelayMs?: number;
  maxDelayMs?: number;
}

export class Listener {
  private client: pg.Client | null = null;
  private closed = false;
  private readonly reconnectDelay: DoublingDelay;
  private timer: NodeJS.Timeout | null = null;
  private connected = false;

  constructor(private readonly opts: ListenerOptions) {
    this.reconnectDelay = new DoublingDelay(opts.minDelayMs ?? 100, opts.maxDelayMs ?? 5_000);
  }

  get isConnected(): boolean {
    return this.connected;
  }

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.opts.url, application_name: 'acw-webhooks-listener' });
    this.client = client;
    let failed = false;
    const onLost = (err?: Error): void => {
      if (failed) return;
      failed = true;
      this.connected = false;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.opts.log?.warn({ event: 'db.listener_lost', err: err?.message }, 'LISTEN connection lost; reconnecting');
      this.schedule();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (msg) => this.opts.onNotify(msg.channel, msg.payload));
    try {
      await client.connect();
      for (const ch of this.opts.channels) await client.query(`listen ${quoteIdent(ch)}`);
      this.connected = true;
      this.reconnectDelay.reset();
    } catch (err) {
      onLost(err as Error);
      return;
    }
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    const wait = this.reconnectDelay.next();
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect().then(() => {
        if (this.connected) this.opts.onReconnect?.();
      });
    }, wait);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const c = this.client;
    this.client = null;
    this.connected = false;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      await c.end().catch(() => undefined);
    }
  }
}
