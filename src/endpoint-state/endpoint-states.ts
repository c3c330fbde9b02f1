import type pg from 'pg';
import type { Endpoint } from '../config/index.js';
import type { ListenHub, Subscription } from '../db/listen-hub.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ClaimedJob, JobOutcome } from '../queue/types.js';
import { WEBHOOK_JOB } from '../webhook/job.js';
import type { AlertSinks } from '../sinks/outlet.js';
import { alertDueAt, raiseOwedAlerts } from './alerts.js';
import { closeAllCircuits, ensureStateRows, readHoldingStates, writeOutcomes, type FlushRow } from './circuit-rows.js';
import { PendingOutcomes } from './pending-outcomes.js';
import { Probes, type ProbeRunner } from './probes.js';
import { attemptSignal } from './signals.js';
import { isHolding, type CachedState, type CircuitConfig, type CircuitState } from './types.js';

export interface EndpointStatesOptions {
  pool: pg.Pool;
  /** The process's LISTEN connection. */
  listenHub: ListenHub;
  /** NOTIFY channel naming an endpoint whose row changed. */
  channel: string;
  alertsChannel: string;
  /** Where alerts go besides the API (docs/operations.md#alert-sinks); null or absent: nowhere else. */
  alertSinks?: AlertSinks | null | undefined;
  circuit: CircuitConfig;
  endpoints: () => ReadonlyMap<string, Endpoint>;
  log: Logger;
  /** Re-read the shared state at least this often (the cache is never staler). Default 1 s. */
  refreshMs?: number;
  /** Outcomes are written at most this long after they happen. Default 100 ms. */
  flushMs?: number;
}

/**
 * Endpoint state shared through PostgreSQL (docs/operations.md#circuit-breaker), as one process
 * takes part in it:
 * - a cache of the rows that hold jobs (open, half-open, paused), re-read every second and at
 *   once on a NOTIFY, which the worker pool's claim plans and claim on dispatch obey through the
 *   endpoint gate (gate.ts; the claim statement also checks the table itself);
 * - the outcomes of this process's attempts, folded per endpoint (pending-outcomes.ts) and written
 *   in one statement (circuit-rows.ts, which decides whether a circuit opens or closes) at most
 *   every 100 ms, at once when a probe settles or this process alone has seen the failure
 *   threshold, which also holds the endpoint here until the row says what it is;
 * - a tick that claims a probe for an open endpoint whose cool-down is over and sends a half-open
 *   circuit whose probe outlived its deadline back to open (probes.ts), and raises the circuit's
 *   and the failing endpoint's alerts and their resolutions (alerts.ts), each exactly once across
 *   processes (the row lock decides who raises it).
 */
export class EndpointStates {
  private cache = new Map<string, CachedState>();
  /** Outcomes folded since the last flush; at the failure threshold, the endpoint is held here at once. */
  private readonly outcomes: PendingOutcomes;
  private readonly probes: Probes;
  private runner: ProbeRunner | null = null;
  private listener: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** The tick running now, if any. */
  private ticking: Promise<void> | null = null;
  private lastRefresh = -Infinity;
  private refreshWanted = true;
  private stopped = false;
  private ratesCache: ReadonlyMap<string, number> = new Map();
  private ratesFrom: ReadonlyMap<string, Endpoint> | null = null;
  /** The endpoint set whose rows were last made sure of (ensureRows). */
  private rowsFor: ReadonlyMap<string, Endpoint> | null = null;

  constructor(private readonly opts: EndpointStatesOptions) {
    this.outcomes = new PendingOutcomes(opts.circuit);
    this.probes = new Probes({ pool: opts.pool, channel: opts.channel, circuit: opts.circuit, log: opts.log, refreshMs: this.refreshMs });
  }

  private get circuitOn(): boolean {
    return this.opts.circuit.enabled;
  }

  private get refreshMs(): number {
    return this.opts.refreshMs ?? 1_000;
  }

  /** Jobs of this endpoint wait here now: disabled in config, paused, its circuit not closed, or tripped here. */
  isHeld(endpoint: string): boolean {
    const ep = this.opts.endpoints().get(endpoint);
    if (ep && !ep.enabled) return true;
    if (isHolding(this.cache.get(endpoint))) return true;
    return this.circuitOn && this.outcomes.tripped(endpoint);
  }

  /** Is this job a probe this process claimed? (Its failure hands the job back unspent.) */
  isProbe(jobId: string): boolean {
    return this.probes.has(jobId);
  }

  /** Rate limits per endpoint (deliveries/s), for the claim; rebuilt only when the endpoints change. */
  rates(): ReadonlyMap<string, number> {
    const eps = this.opts.endpoints();
    if (this.ratesFrom !== eps) {
      const out = new Map<string, number>();
      for (const [name, ep] of eps) if (ep.rate_limit > 0) out.set(name, ep.rate_limit);
      this.ratesCache = out;
      this.ratesFrom = eps;
    }
    return this.ratesCache;
  }

  /** The circuit state of one endpoint as cached here (closed when it has no row that holds jobs). */
  circuitOf(endpoint: string): CircuitState {
    return this.cache.get(endpoint)?.circuit ?? 'closed';
  }

  /** Feed one finished attempt; called for every webhook outcome before it is written. */
  observe(job: ClaimedJob, outcome: JobOutcome): void {
    const endpoint = job.endpoint;
    if (endpoint === null || job.type !== WEBHOOK_JOB) return;
    const probe = this.probes.settle(job.id);
    // With the breaker off the outcomes are still written: the row keeps the last error and judges
    // a failing endpoint (docs/operations.md#failing-endpoints); the flush never opens its circuit.
    const signal = attemptSignal(outcome, probe);
    if (signal === null && !probe) return;
    this.outcomes.add(endpoint, signal, outcome, probe ? job.id : null);
    // A probe that says nothing (aborted at shutdown) settles nothing: stop() lets another process probe.
    if (probe && signal === null) this.probes.abandon(job.id);
    // A probe's outcome, or the threshold seen here, is written at once.
    if (probe || this.outcomes.tripped(endpoint)) this.flushSoon(0);
    else this.flushSoon(this.opts.flushMs ?? 100);
  }

  /**
   * Every endpoint delivered to has its row (a rate limit's bucket lives there; an endpoint without
   * one would never be claimed). Cheap to call often: it writes only when the endpoint set changed.
   */
  async ensureRows(): Promise<void> {
    const eps = this.opts.endpoints();
    if (this.rowsFor === eps) return;
    await ensureStateRows(this.opts.pool, [...eps.keys()]);
    this.rowsFor = eps;
  }

  /** Make sure every configured endpoint has its row, listen for changes, start the tick. */
  async start(runner: ProbeRunner | null): Promise<void> {
    this.runner = runner;
    await this.ensureRows();
    // With the breaker off, nothing would ever close a circuit left open (or half-open) before:
    // close them now, so their endpoints deliver again (a recovery alert follows if one was raised).
    if (!this.circuitOn) {
      const closed = await closeAllCircuits(this.opts.pool, this.opts.channel);
      for (const endpoint of closed) {
        this.opts.log.info(
          { event: 'endpoint.circuit_closed', endpoint, reason: 'circuit_disabled' },
          `endpoint ${endpoint}: circuit closed (notify.webhook.circuit.enabled is false)`,
        );
      }
    }
    this.listener = await this.opts.listenHub.subscribe(this.opts.channel, {
      onNotify: () => this.refreshSoon(),
      onReconnect: () => this.refreshSoon(),
    });
    await this.refresh().catch(() => undefined);
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    await this.flushing;
    if (this.outcomes.size > 0) await this.flush().catch(() => undefined);
    await this.probes.cutShort().catch(() => undefined);
    await this.listener?.close();
  }

  private refreshSoon(): void {
    this.refreshWanted = true;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private flushSoon(ms: number): void {
    if (this.stopped || this.flushing) return;
    if (this.flushTimer && ms > 0) return;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      this.flushing = this.flush()
        .catch((err: unknown) => {
          this.opts.log.warn(
            { event: 'endpoint.state_write_error', err: coerceError(err).message },
            'writing endpoint state failed; retrying',
          );
        })
        .finally(() => {
          this.flushing = null;
          if (this.outcomes.size > 0) this.flushSoon(this.opts.flushMs ?? 100);
        });
    }, ms);
  }

  /** Write the outcomes folded since the last flush (on failure they are folded back in). */
  private async flush(): Promise<void> {
    if (this.outcomes.size === 0) return;
    const batch = this.outcomes.take();
    let rows: FlushRow[];
    try {
      rows = await writeOutcomes(this.opts.pool, batch, this.opts.circuit, this.opts.channel);
    } catch (err) {
      this.outcomes.restore(batch);
      throw err;
    }
    this.outcomes.written(batch);
    let changed = false;
    for (const r of rows) {
      if (r.failing !== r.old_failing) {
        changed = true;
        this.opts.log.warn(
          { event: r.failing ? 'endpoint.failing' : 'endpoint.failing_ended', endpoint: r.endpoint },
          r.failing
            ? `endpoint ${r.endpoint}: at least half of its recent deliveries failed permanently`
            : `endpoint ${r.endpoint}: no longer failing`,
        );
      }
      if (r.circuit === r.old_circuit) continue;
      changed = true;
      const base = { endpoint: r.endpoint, from: r.old_circuit, to: r.circuit };
      if (r.circuit === 'open') {
        this.opts.log.warn(
          {
            event: 'endpoint.circuit_opened',
            ...base,
            consecutive_failures: r.consecutive_failures,
            cooldown_ms: r.cooldown_ms,
            last_error: r.last_error,
          },
          r.old_circuit === 'half_open'
            ? `endpoint ${r.endpoint}: probe failed, circuit open again`
            : `endpoint ${r.endpoint}: circuit opened`,
        );
      } else if (r.circuit === 'closed') {
        this.opts.log.info({ event: 'endpoint.circuit_closed', ...base }, `endpoint ${r.endpoint}: probe succeeded, circuit closed`);
      }
      this.applyLocally(r.endpoint, r.circuit);
    }
    if (changed) this.refreshSoon();
  }

  /** What a flush just changed, before the next read of the table confirms it. */
  private applyLocally(endpoint: string, circuit: CircuitState): void {
    const prev = this.cache.get(endpoint);
    if (circuit === 'closed' && prev && !prev.paused && prev.openAlertId === null && !prev.failing && prev.failingAlertId === null) {
      this.cache.delete(endpoint);
    } else {
      this.cache.set(endpoint, {
        circuit,
        paused: prev?.paused ?? false,
        nextProbeAt: prev?.nextProbeAt ?? null,
        probeDeadline: null,
        openedAt: prev?.openedAt ?? null,
        circuitSince: Date.now(),
        openAlertId: prev?.openAlertId ?? null,
        failing: prev?.failing ?? false,
        failingAlertId: prev?.failingAlertId ?? null,
      });
    }
    // A closed circuit frees its backlog; an open one frees nothing but is cheap to tell.
    this.runner?.wake(true);
  }

  /** Re-read the rows that hold jobs or owe an alert. */
  private async refresh(): Promise<void> {
    this.refreshWanted = false;
    this.lastRefresh = Date.now();
    const rows = await readHoldingStates(this.opts.pool);
    const localNow = Date.now();
    const next = new Map<string, CachedState>();
    const local = (ms: number | null, dbNow: number): number | null => (ms === null ? null : ms - (dbNow - localNow));
    for (const r of rows) {
      next.set(r.endpoint, {
        circuit: r.circuit,
        paused: r.paused,
        nextProbeAt: local(r.next_probe_ms, r.db_now_ms),
        probeDeadline: local(r.probe_deadline_ms, r.db_now_ms),
        openedAt: local(r.opened_ms, r.db_now_ms),
        circuitSince: local(r.since_ms, r.db_now_ms),
        openAlertId: r.open_alert_id === null ? null : Number(r.open_alert_id),
        failing: r.failing,
        failingAlertId: r.failing_alert_id === null ? null : Number(r.failing_alert_id),
      });
    }
    const freed = [...this.cache].some(([ep, s]) => isHolding(s) && !isHolding(next.get(ep)));
    // Newly held here (opened or paused through another process): the pool hands back what it
    // claimed ahead for it, so that no delivery of it waits leased in this process.
    const held = [...next].some(([ep, s]) => isHolding(s) && !isHolding(this.cache.get(ep)));
    this.cache = next;
    if (freed || held) this.runner?.wake(freed);
  }

  /**
   * Resolves once no tick and no flush is running (what either started is written): a test on a
   * fake clock waits for it after each step, since their statements run on the real one.
   */
  async settled(): Promise<void> {
    while (this.ticking || this.flushing) await Promise.all([this.ticking, this.flushing]);
  }

  private tick(): Promise<void> {
    this.timer = null;
    if (this.stopped || this.ticking) return this.ticking ?? Promise.resolve();
    this.ticking = this.turn().finally(() => {
      this.ticking = null;
      this.schedule(this.nextTickIn());
    });
    return this.ticking;
  }

  private async turn(): Promise<void> {
    try {
      if (this.refreshWanted || Date.now() - this.lastRefresh >= this.refreshMs) await this.refresh();
      await this.ensureRows();
      if (this.circuitOn && this.runner) await this.probes.claimDue(this.cache, this.opts.endpoints(), this.runner);
      if (await this.probes.expireLate(this.cache)) await this.refresh();
      if (
        await raiseOwedAlerts(this.opts.pool, this.opts.alertsChannel, this.cache, this.opts.circuit, this.opts.log, this.opts.alertSinks)
      )
        await this.refresh();
    } catch (err) {
      this.opts.log.warn({ event: 'endpoint.state_read_error', err: coerceError(err).message }, 'reading endpoint state failed; retrying');
    }
  }

  /** Until the next refresh, or sooner when a probe, a deadline or an alert falls due. */
  private nextTickIn(): number {
    const now = Date.now();
    let at = this.lastRefresh + this.refreshMs;
    for (const s of this.cache.values()) {
      if (s.circuit === 'open' && !s.paused && s.nextProbeAt !== null) at = Math.min(at, s.nextProbeAt);
      if (s.circuit === 'half_open' && s.probeDeadline !== null) at = Math.min(at, s.probeDeadline);
      const owed = alertDueAt(s, this.opts.circuit);
      if (owed !== null) at = Math.min(at, owed);
    }
    return Math.max(10, at - now + 5);
  }
}
