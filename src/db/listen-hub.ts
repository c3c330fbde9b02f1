import pg from 'pg';
import { DoublingDelay } from '../delay.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { quoteIdent } from './sql.js';

/** The LISTEN connection's application_name (pg_stat_activity shows it; `acw-webhooks status` too). */
export const LISTENER_APP = 'acw-webhooks-listener';

/** What a subscriber of one channel is told. */
export interface ListenSubscriber {
  /** A NOTIFY on the channel arrived. */
  onNotify(payload: string | undefined): void;
  /**
   * The connection is back after a loss (or after a first connect that failed), every channel
   * LISTENed again: NOTIFYs sent meanwhile are gone, so re-read whatever they would have said.
   */
  onReconnect(): void;
}

/** One subscription; close() ends it (UNLISTEN once its channel has no subscriber left). */
export interface Subscription {
  close(): Promise<void>;
}

export interface ListenHubOptions {
  url: string;
  log?: Logger | undefined;
  /** Back-off bounds for reconnecting, ms. */
  minDelayMs?: number;
  maxDelayMs?: number;
}

interface Entry {
  sub: ListenSubscriber;
}

/**
 * The one LISTEN connection of a process (docs/operations.md#deployment): its own session outside
 * the pool (LISTEN needs a real session, so not PgBouncer in transaction mode), opened with the
 * first subscription, with every channel multiplexed over it: LISTEN once per channel however many
 * subscribe, UNLISTEN when the last one leaves. A lost connection is logged once, reconnected with
 * back-off, every channel LISTENed again, and then every subscriber's onReconnect is called.
 */
export class ListenHub {
  private readonly subs = new Map<string, Set<Entry>>();
  /** The connection being opened or open; null while down or before the first subscription. */
  private client: pg.Client | null = null;
  /** Channels LISTENed on `client`. */
  private readonly listened = new Set<string>();
  /** Connects, LISTENs and UNLISTENs, one at a time and in order. */
  private work: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  /** Lost (or never connected): the next connect is a reconnect, and its loss is logged already. */
  private down = false;
  private closed = false;
  /** Set while a connect waits for the server: ends that wait. */
  private abandonConnect: (() => void) | null = null;
  private readonly delay: DoublingDelay;

  constructor(private readonly opts: ListenHubOptions) {
    this.delay = new DoublingDelay(opts.minDelayMs ?? 100, opts.maxDelayMs ?? 5_000);
  }

  /** Connected, with every subscribed channel LISTENed. */
  get isConnected(): boolean {
    return this.client !== null && !this.down && [...this.subs.keys()].every((ch) => this.listened.has(ch));
  }

  /**
   * Subscribe to `channel`; resolves once it is LISTENed (a NOTIFY committed after that reaches
   * `sub`). It never throws: with the database unreachable it resolves at once, the connection is
   * retried in the background, and `sub.onReconnect` is called once it is up.
   */
  async subscribe(channel: string, sub: ListenSubscriber): Promise<Subscription> {
    if (this.closed) return { close: async () => undefined };
    const entry: Entry = { sub };
    let set = this.subs.get(channel);
    if (!set) this.subs.set(channel, (set = new Set()));
    set.add(entry);
    await this.sync();
    let closed = false;
    return {
      close: async () => {
        if (closed) return;
        closed = true;
        const s = this.subs.get(channel);
        s?.delete(entry);
        if (s?.size === 0) this.subs.delete(channel);
        await this.sync();
      },
    };
  }

  /**
   * The backend of this connection and the channels it LISTENs to as the server says
   * (pg_listening_channels() answers for its own session only), sorted, once the work queued before
   * has run; null while down. For tests and diagnostics.
   */
  async listening(): Promise<{ pid: number; channels: string[] } | null> {
    let out: { pid: number; channels: string[] } | null = null;
    const read = this.work.then(async () => {
      const c = this.client;
      if (c === null || this.down) return;
      try {
        const res = await c.query<{ pid: number; channels: string[] }>(
          'select pg_backend_pid() as pid, array(select pg_listening_channels()) as channels',
        );
        const row = res.rows[0]!;
        out = { pid: row.pid, channels: row.channels.toSorted() };
      } catch (err) {
        this.lose(c, err);
      }
    });
    this.work = read;
    await read;
    return out;
  }

  /**
   * Close the connection; subscriptions end with it and later ones are no-ops. Resolves once no
   * connect or query of this hub is under way, so nothing reaches the server after it.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const c = this.client;
    this.client = null;
    this.listened.clear();
    this.abandonConnect?.();
    if (c) await endClient(c);
    // A connect or query under way fails once its client is ended: wait for that, so that nothing
    // of this hub reaches the server after close().
    await this.work;
  }

  /** Bring the connection in line with the subscriptions (queued behind any work under way). */
  private sync(): Promise<void> {
    const run = this.work.then(() => this.apply());
    // apply() handles a lost connection itself; anything else (a bug) fails this call, not the next.
    this.work = run.catch(() => undefined);
    return run;
  }

  /** Never rejects: a failure is a lost connection, handled by lose(). */
  private async apply(): Promise<void> {
    if (this.closed || (this.subs.size === 0 && this.client === null)) return;
    const c = this.client;
    // Down with a reconnect scheduled: it LISTENs every channel then.
    if (c === null) {
      if (!this.timer) await this.connect();
      return;
    }
    try {
      for (const ch of this.subs.keys()) {
        if (this.listened.has(ch)) continue;
        await c.query(`listen ${quoteIdent(ch)}`);
        if (this.client === c) this.listened.add(ch);
      }
      for (const ch of this.listened) {
        if (this.subs.has(ch)) continue;
        await c.query(`unlisten ${quoteIdent(ch)}`);
        this.listened.delete(ch);
      }
    } catch (err) {
      this.lose(c, err);
    }
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.opts.url,
      application_name: LISTENER_APP,
      // As the pool's (src/db/pool.ts): an unreachable server fails the attempt, and a peer that
      // vanished without a word is found by the OS, rather than leaving wake-ups silent for good.
      connectionTimeoutMillis: 10_000,
      keepAlive: true,
    });
    this.client = client;
    client.on('error', (err) => this.lose(client, err));
    client.on('end', () => this.lose(client));
    client.on('notification', (msg) => this.deliver(msg.channel, msg.payload));
    try {
      // pg's connect() never settles when the client is ended half-way (close() does that): give up then.
      await new Promise<void>((resolve, reject) => {
        this.abandonConnect = () => reject(new Error('connect abandoned'));
        client.connect().then(() => resolve(), reject);
      }).finally(() => (this.abandonConnect = null));
      for (const ch of this.subs.keys()) {
        await client.query(`listen ${quoteIdent(ch)}`);
        if (this.client === client) this.listened.add(ch);
      }
    } catch (err) {
      this.lose(client, err);
      return;
    }
    // Closed (or lost) while connecting: that client is ended already.
    if (this.client !== client) return;
    this.delay.reset();
    if (!this.down) return;
    this.down = false;
    this.opts.log?.info({ event: 'db.listener_back', channels: this.listened.size }, 'LISTEN connection back');
    // A snapshot: a subscriber may subscribe or leave from its callback.
    for (const e of Array.from(this.subs.values(), (set) => Array.from(set)).flat()) this.call(() => e.sub.onReconnect());
  }

  private lose(client: pg.Client, err?: unknown): void {
    if (client !== this.client) return;
    this.client = null;
    this.listened.clear();
    void endClient(client);
    if (this.closed) return;
    const e = err === undefined ? undefined : coerceError(err).message;
    const retryInMs = this.schedule();
    // One warning per loss, however many retries it takes.
    if (this.down)
      this.opts.log?.debug({ event: 'db.listener_retry_failed', err: e, retry_in_ms: retryInMs }, 'LISTEN connection still down; retrying');
    else this.opts.log?.warn({ event: 'db.listener_lost', err: e, retry_in_ms: retryInMs }, 'LISTEN connection lost; reconnecting');
    this.down = true;
  }

  /** Reconnect after the back-off (doubling from minDelayMs to maxDelayMs, reset once connected); returns the wait. */
  private schedule(): number | undefined {
    if (this.timer || this.closed) return undefined;
    const wait = this.delay.next();
    this.timer = setTimeout(() => {
      this.timer = null;
      // Queued like any other work; a subscribe that came first may have connected already.
      this.work = this.work
        .then(() => (this.client === null && !this.closed ? this.connect() : undefined))
        // connect() handles its failures itself: this is a bug, said once rather than swallowed.
        .catch((err: unknown) =>
          this.opts.log?.error({ event: 'db.listener_error', err: coerceError(err).message }, 'reconnecting LISTEN failed'),
        );
    }, wait);
    this.timer.unref();
    return wait;
  }

  private deliver(channel: string, payload: string | undefined): void {
    const set = this.subs.get(channel);
    if (set) for (const e of Array.from(set)) this.call(() => e.sub.onNotify(payload));
  }

  /** A subscriber's bug must not stop the others from hearing. */
  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.log?.error({ event: 'db.listener_subscriber_error', err: coerceError(err).message }, 'a LISTEN subscriber failed');
    }
  }
}

/**
 * A subscription on `hub`, or, for a component used on its own (an embedding application's
 * WorkerPool, `alerts --follow`), on a hub of its own that closing the subscription closes too.
 */
export async function listenOn(
  hub: ListenHub | undefined,
  own: { url: string; log?: Logger | undefined },
  channel: string,
  sub: ListenSubscriber,
): Promise<Subscription> {
  if (hub) return hub.subscribe(channel, sub);
  const mine = new ListenHub(own);
  await mine.subscribe(channel, sub);
  return { close: () => mine.close() };
}

async function endClient(c: pg.Client): Promise<void> {
  c.removeAllListeners('notification');
  c.removeAllListeners('end');
  // An error on a client being ended is expected; one with no listener would be thrown.
  c.removeAllListeners('error');
  c.on('error', () => undefined);
  await c.end().catch(() => undefined);
}
