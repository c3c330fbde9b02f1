import { Listener } from '../db/listener.js';
import type { Logger } from '../log.js';

/**
 * One LISTEN connection for every SSE client of this server (not one each), fanning wake-ups out.
 * A reconnect wakes everyone too: a NOTIFY sent while the connection was down is gone.
 */
export class AlertHub {
  private listener: Listener | null = null;
  private readonly wakes = new Set<() => void>();

  constructor(private readonly opts: { url: string; channel: string; log: Logger }) {}

  async start(): Promise<void> {
    if (this.listener) return;
    this.listener = new Listener({
      url: this.opts.url,
      channels: [this.opts.channel],
      log: this.opts.log,
      onNotify: () => this.wakeAll(),
      onReconnect: () => this.wakeAll(),
    });
    await this.listener.start();
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
