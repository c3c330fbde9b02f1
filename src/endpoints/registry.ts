import type pg from 'pg';
import { resolveEndpoints, resolveSinks, type Config, type Endpoint } from '../config/index.js';
import type { ListenHub, Subscription } from '../db/listen-hub.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import type { SecretCodec } from './codec.js';
import { readStoredEndpoints, storedVersion, toEndpoint, type StoredRow } from './rows.js';
import { sealPlainHeaders } from './seal-headers.js';

/** After a failed sealing of plain header values, the next try waits this long (they work meanwhile). */
const SEAL_RETRY_MS = 60_000;

export interface RegistryOptions {
  pool: pg.Pool;
  /** The process's LISTEN connection. */
  listenHub: ListenHub;
  /** NOTIFY channel the endpoints API announces changes on. */
  channel: string;
  config: Config;
  /** Opens stored secrets; null: no encryption key here, so stored endpoints are held (their jobs wait). */
  codec: SecretCodec | null;
  log: Logger;
  /** Look at the table at least this often (a lost NOTIFY costs at most this). Default 1 s. */
  pollMs?: number;
  /** Called after the list changed (new objects: a changed endpoint is a new object). */
  onChange?: (endpoints: readonly Endpoint[]) => void;
}

/** A config endpoint's name is also a stored endpoint's: refused at start (docs/operations.md#endpoints-at-run-time). */
export class EndpointNameClash extends Error {
  override readonly name = 'EndpointNameClash';
}

/**
 * The endpoints this process delivers to (docs/operations.md#endpoints-at-run-time): those of the
 * config file (`source: config`), then those stored through the API (`source: api`), read at start,
 * again on every NOTIFY of the API's changes, and at least every second (a cheap fingerprint first),
 * so a change reaches every process within a second. Each change makes a new list and new objects
 * for what changed; an attempt already under way keeps the endpoint object it started with.
 */
export class EndpointRegistry {
  private readonly fromConfig: Endpoint[];
  /** The alert sinks' internal endpoints (docs/operations.md#alert-sinks): in byName (delivered to), never in `endpoints`. */
  private readonly sinks: Endpoint[];
  private list: readonly Endpoint[];
  private map: ReadonlyMap<string, Endpoint>;
  private version = '';
  private byRow = new Map<string, { key: string; ep: Endpoint }>();
  private listener: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<void> | null = null;
  /** The read that follows the one under way, for forced calls made meanwhile. */
  private followUp: Promise<void> | null = null;
  private stopped = false;
  private readonly unreadable = new Set<string>();
  private sealRetryAt = 0;

  constructor(private readonly opts: RegistryOptions) {
    this.fromConfig = resolveEndpoints(opts.config);
    this.sinks = resolveSinks(opts.config);
    this.list = this.fromConfig;
    this.map = this.mapOf(this.list);
  }

  /** The customer endpoints: the config's, then the stored ones (no alert sink). */
  get endpoints(): readonly Endpoint[] {
    return this.list;
  }

  /** Every endpoint delivered to by name, the alert sinks' included. */
  get byName(): ReadonlyMap<string, Endpoint> {
    return this.map;
  }

  private mapOf(list: readonly Endpoint[]): ReadonlyMap<string, Endpoint> {
    return new Map([...list, ...this.sinks].map((e) => [e.name, e]));
  }

  /** Names defined in the config file. */
  get configNames(): ReadonlySet<string> {
    return new Set(this.fromConfig.map((e) => e.name));
  }

  /**
   * Read the table once (refusing a name clash with the config), then follow it. A database that
   * cannot be read yet (unreachable, or not migrated: /readyz says so) does not stop the start: the
   * config's endpoints serve meanwhile, and the table is read once it can be.
   */
  async start(): Promise<void> {
    let rows: StoredRow[] | null = null;
    try {
      rows = await readStoredEndpoints(this.opts.pool);
      this.version = await storedVersion(this.opts.pool);
    } catch (err) {
      this.opts.log.warn({ event: 'endpoints.read_error', err: coerceError(err).message }, 'stored endpoints cannot be read yet; retrying');
    }
    if (rows) {
      const clash = rows.filter((r) => this.fromConfig.some((e) => e.name === r.name));
      if (clash.length > 0) {
        const names = clash.map((r) => r.name).join(', ');
        throw new EndpointNameClash(
          `notify.webhook.endpoints: ${names} ${clash.length === 1 ? 'is' : 'are'} also created through the endpoints API ` +
            `(stored in the database): rename the config entry, or delete the stored endpoint (acw-webhooks endpoints remove NAME)`,
        );
      }
      // Every start seals what an older process left plain (tombstones included); see ./seal-headers.ts.
      if (await this.sealHeaders()) rows = await this.readOr(rows);
      this.apply(rows);
    }
    // It never throws: a failed connect is retried in the background, the poll covering the gap.
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
    this.timer = setTimeout(() => {
      void this.refresh(false).finally(() => this.schedule());
    }, this.opts.pollMs ?? 1_000);
  }

  /**
   * Re-read (always after a NOTIFY; after the poll only when the fingerprint moved). One read at a
   * time. A forced call while a read is under way waits for a read that starts after that one: the
   * read under way may have begun before the caller's own change committed (a create answered from
   * the registry would not find what it just created).
   */
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
        const v = await storedVersion(this.opts.pool);
        if (!force && v === this.version) return;
        let rows = await readStoredEndpoints(this.opts.pool);
        if (rows.some((r) => !r.headers_sealed) && (await this.sealHeaders())) rows = await this.readOr(rows);
        this.version = v;
        this.apply(rows);
      } catch (err) {
        this.opts.log.warn({ event: 'endpoints.read_error', err: coerceError(err).message }, 'reading stored endpoints failed; retrying');
      }
    })().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  /**
   * Seal plain header values (./seal-headers.ts); true when some were. A failure is logged and tried
   * again a minute later: the plain values keep working meanwhile.
   */
  private async sealHeaders(): Promise<boolean> {
    const codec = this.opts.codec;
    if (!codec || Date.now() < this.sealRetryAt) return false;
    try {
      const { sealed } = await sealPlainHeaders(this.opts.pool, codec);
      if (sealed.length === 0) return false;
      this.opts.log.info(
        { event: 'endpoints.headers_sealed', endpoints: sealed },
        `header values of ${sealed.length} stored endpoint(s) written before they were sealed at rest are sealed now`,
      );
      return true;
    } catch (err) {
      this.sealRetryAt = Date.now() + SEAL_RETRY_MS;
      this.opts.log.warn(
        { event: 'endpoints.seal_error', err: coerceError(err).message },
        'sealing stored header values failed; they keep working as they are, and it is tried again in a minute',
      );
      return false;
    }
  }

  /** The rows again (after sealing), or `rows` when that read fails: they hold the same endpoints. */
  private async readOr(rows: StoredRow[]): Promise<StoredRow[]> {
    return readStoredEndpoints(this.opts.pool).catch(() => rows);
  }

  private apply(rows: readonly StoredRow[]): void {
    const next = new Map<string, { key: string; ep: Endpoint }>();
    let changed = rows.length !== this.byRow.size;
    for (const r of rows) {
      if (this.fromConfig.some((e) => e.name === r.name)) continue; // refused at start; a later clash keeps the config's
      // The whole row, not updated_at alone: a Date keeps milliseconds, and two updates of one
      // endpoint can fall within the same one (a secret fixed, then broken again, was missed).
      const key = JSON.stringify(r);
      const prev = this.byRow.get(r.name);
      if (prev && prev.key === key) {
        next.set(r.name, prev);
        continue;
      }
      changed = true;
      next.set(r.name, { key, ep: this.open(r) });
    }
    for (const name of this.byRow.keys()) if (!next.has(name)) changed = true;
    this.byRow = next;
    if (!changed) return;
    this.list = [...this.fromConfig, ...[...next.values()].map((v) => v.ep)];
    this.map = this.mapOf(this.list);
    this.opts.onChange?.(this.list);
  }

  /** The row as an Endpoint; one whose secret or header value cannot be opened here is held (disabled), never sent unsigned. */
  private open(r: StoredRow): Endpoint {
    const codec = this.opts.codec;
    try {
      if (!codec) throw new Error('no encryption key is configured here (secrets.encryption_key)');
      const ep = toEndpoint(r, this.opts.config, codec);
      this.unreadable.delete(r.name);
      return ep;
    } catch (err) {
      if (!this.unreadable.has(r.name)) {
        this.unreadable.add(r.name);
        this.opts.log.error(
          { event: 'endpoint.secret_unreadable', endpoint: r.name, err: coerceError(err).message },
          `endpoint ${r.name}: its secret or a header value cannot be opened here, so its jobs wait`,
        );
      }
      const w = this.opts.config.notify.webhook;
      return {
        name: r.name,
        url: r.url,
        secret: '',
        topics: r.topics,
        timeout: r.timeout_ms ?? w.timeout,
        connect_timeout: Math.min(w.connect_timeout ?? 5_000, r.timeout_ms ?? w.timeout),
        max_in_flight: Math.min(r.max_in_flight ?? w.max_in_flight, w.max_in_flight_total),
        rate_limit: 0,
        scheme: r.scheme,
        ordering: r.ordering,
        // Never sent (disabled); and sealed values are no headers.
        headers: {},
        enabled: false,
        source: 'api',
        description: r.description,
        owner: r.owner,
        created_at: r.created_at.toISOString(),
        updated_at: r.updated_at.toISOString(),
        ssrf_guard: true,
        allow_networks: w.allow_networks,
      };
    }
  }
}
