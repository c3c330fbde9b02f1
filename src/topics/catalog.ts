import type pg from 'pg';
import type { Config, ValidationMode } from '../config/index.js';
import type { ListenHub, Subscription } from '../db/listen-hub.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { catalogVersion, readTopics, type Topic } from './rows.js';

/** What notify needs of the catalog (a live TopicCatalog, or one read once by the CLI). */
export interface CatalogView {
  /** A declared topic (archived ones too). */
  get(name: string): Topic | undefined;
  /** Every topic. */
  readonly topics: readonly Topic[];
  readonly mode: ValidationMode;
  readonly requireDeclared: boolean;
}

/** A catalog read once (the CLI): the same view, not followed. */
export async function readCatalogOnce(pool: pg.Pool, config: Config): Promise<CatalogView> {
  const list = await readTopics(pool);
  const map = new Map(list.map((t) => [t.name, t]));
  return { get: (n) => map.get(n), topics: list, mode: config.topics.validation, requireDeclared: config.topics.require_declared };
}

export interface TopicCatalogOptions {
  pool: pg.Pool;
  listenHub: ListenHub;
  /** NOTIFY channel the topics API announces changes on. */
  channel: string;
  config: Config;
  log: Logger;
  /** Look at the table at least this often (a lost NOTIFY costs at most this). Default 1 s. */
  pollMs?: number;
}

/**
 * The topic catalog of this process (docs/operations.md#topic-catalog): read at start, again on
 * every NOTIFY of the topics API, and at least every second (a fingerprint first), as the endpoint
 * registry follows stored endpoints. Each read makes a new map; a notify in progress keeps the
 * one it started with.
 */
export class TopicCatalog implements CatalogView {
  private map: ReadonlyMap<string, Topic> = new Map();
  private list: readonly Topic[] = [];
  private version = '';
  private listener: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<void> | null = null;
  private followUp: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly opts: TopicCatalogOptions) {}

  get mode(): ValidationMode {
    return this.opts.config.topics.validation;
  }

  get requireDeclared(): boolean {
    return this.opts.config.topics.require_declared;
  }

  get topics(): readonly Topic[] {
    return this.list;
  }

  get(name: string): Topic | undefined {
    return this.map.get(name);
  }

  async start(): Promise<void> {
    await this.refresh(true);
    this.listener = await this.opts.listenHub.subscribe(this.opts.channel, {
      onNotify: () => void this.refresh(true),
      onReconnect: () => void this.refresh(true),
    });
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.reading;
    await this.followUp;
    await this.listener?.close();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.refresh(false).finally(() => this.schedule()), this.opts.pollMs ?? 1_000);
  }

  /** Re-read (always when forced; after the poll only when the fingerprint moved); a forced call waits for a read that starts after it. */
  async refresh(force: boolean): Promise<void> {
    if (this.reading) {
      if (!force) return this.reading;
      this.followUp ??= this.reading.then(() => {
        this.followUp = null;
        return this.stopped ? undefined : this.refresh(true);
      });
      return this.followUp;
    }
    this.reading = (async () => {
      try {
        const v = await catalogVersion(this.opts.pool);
        if (!force && v === this.version) return;
        const list = await readTopics(this.opts.pool);
        this.version = v;
        this.list = list;
        this.map = new Map(list.map((t) => [t.name, t]));
      } catch (err) {
        this.opts.log.warn({ event: 'topics.read_error', err: coerceError(err).message }, 'reading the topic catalog failed; retrying');
      }
    })().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }
}
