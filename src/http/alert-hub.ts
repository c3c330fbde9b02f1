import type { ListenHub, Subscription } from '../db/listen-hub.js';

/**
 * One subscription to the alerts channel (on the process's LISTEN connection) for every SSE client
 * of this server, fanning wake-ups out. A reconnect wakes everyone too: each re-reads after its last
 * id, since a NOTIFY sent while the connection was down is gone.
 */
export class AlertHub {
  private listener: Subscription | null = null;
  private readonly wakes = new Set<() => void>();

  constructor(private readonly opts: { listenHub: ListenHub; channel: string }) {}

  async start(): Promise<void> {
    if (this.listener) return;
    this.listener = await this.opts.listenHub.subscribe(this.opts.channel, {
      onNotify: () => this.wakeAll(),
      onReconnect: () => this.wakeAll(),
    });
  }

  subscribe = (wake: () => void): (() => void) => {
    this.wakes.add(wake);
    return () => this.wakes.delete(wake);
  };

  private wakeAll(): void {
    for (const w of this.wakes) w();
  }

  async close(): Promise<void> {
    const l = this.listener;
    this.listener = null;
    await l?.close();
  }
}
