import type pg from 'pg';
import type { Endpoint } from '../config/index.js';
import { Listener } from '../db/listener.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { claimProbes } from '../queue/transitions.js';
import type { ClaimedJob, JobOutcome } from '../queue/types.js';
import { WEBHOOK_JOB } from '../webhook/job.js';
import { settleCircuitAlert } from './alerts.js';
import {
  closeAllCircuits,
  ensureStateRows,
  readHoldingStates,
  reopenCutProbes,
  reopenLateProbes,
  writeOutcomes,
  type FlushRow,
} from './circuit-rows.js';
import { PendingOutcomes } from './pending-outcomes.js';
import { attemptSignal } from './signals.js';
import type { CircuitConfig, CircuitState } from './types.js';

/** A probe still running this long after its connect timeout and attempt timeout sends the circuit back to open. */
export const PROBE_MARGIN_MS = 5_000;

/** What a process needs from its worker pool to run a probe. */
export interface ProbeRunner {
  readonly workerId: string;
  readonly leaseMs: number;
  runClaimed(job: ClaimedJob): void;
  wake(fresh?: boolean): void;
}

/** One endpoint's shared state as this process last read it (times on this process's clock). */
interface Cached {
  circuit: CircuitState;
  paused: boolean;
  nextProbeAt: number | null;
  probeDeadline: number | null;
  openedAt: number | null;
  openAlertId: number | null;
}

export interface EndpointStatesOptions {
  pool: pg.Pool;
  /** For the LISTEN connection. */
  url: string;
  /** NOTIFY channel naming an endpoint whose row changed. */
  channel: string;
  alertsChannel: string;
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
 *   once on a NOTIFY, which the worker pool's claim plans and claim on dispatch obey (the claim
 *   statement also checks the table itself);
 * - the outcomes of this process's attempts, folded per endpoint (PendingOutcomes in
 *   pending-outcomes.ts) and written in one statement at most every 100 ms (at once when a probe
 *   settles or this process alone has seen the failure threshold, which also holds the endpoint
 *   here until the row says what it is);
 * - a tick that claims a probe for an open endpoint whose cool-down is over, sends a half-open
 *   circuit whose probe outlived its deadline back to open, and raises the "open too long" and
 *   recovery alerts, each exactly once across processes (the row lock decides who raises it).
 */
export class EndpointStates {
  private cache = new Map<string, Cached>();
  /** Outcomes folded since the last flush; at the failure threshold, the endpoint is held here at once. */
  private readonly outcomes: PendingOutcomes;
  /** Probes of this process aborted (shutdown) before they could say anything. */
  private readonly abandoned = new Set<string>();
  /** Probe job id -> endpoint, for jobs this process claimed as probes. */
  private readonly probes = new Map<string, string>();
  private runner: ProbeRunner | null = null;
  private listener: Listener | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private ticking = false;
  private lastRefresh = -Infinity;
  private refreshWanted = true;
  private stopped = false;
  private ratesCache: ReadonlyMap<string, number> = new Map();
  private ratesFrom: ReadonlyMap<string, Endpoint> | null = null;
  /** The endpoint set whose rows were last made sure of (ensureRows). */
  private rowsFor: ReadonlyMap<string, Endpoint> | null = null;

  constructor(private readonly opts: EndpointStatesOptions) {
    this.outcomes = new PendingOutcomes(opts.circuit);
  }

  private get circuitOn(): boolean {
    return this.opts.circuit.enabled;
  }

  /** Jobs of this endpoint wait here now: disabled in config, paused, its circuit not closed, or tripped here. */
  isHeld(endpoint: string): boolean {
    const ep = this.opts.endpoints().get(endpoint);
    if (ep && !ep.enabled) return true;
    const s = this.cache.get(endpoint);
    if (s && (s.paused || s.circuit !== 'closed')) return true;
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
    const probeOf = this.probes.get(job.id);
    if (probeOf !== undefined) this.probes.delete(job.id);
    if (!this.circuitOn) return;
    const probe = probeOf !== undefined;
    const signal = attemptSignal(outcome, probe);
    if (signal === null && !probe) return;
    this.outcomes.add(endpoint, signal, outcome, probe ? job.id : null);
    // A probe that says nothing (aborted at shutdown) settles nothing: stop() lets another process probe.
    if (probe && signal === null) this.abandoned.add(job.id);
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
    this.listener = new Listener({
      url: this.opts.url,
      channels: [this.opts.channel],
      log: this.opts.log,
      onNotify: () => this.refreshSoon(),
      onReconnect: () => this.refreshSoon(),
    });
    await this.listener.start();
    await this.refresh().catch(() => undefined);
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    await this.flushing;
    if (this.outcomes.size > 0) await this.flush().catch(() => undefined);
    // Probes cut short by this stop settle nothing: let another process probe at once rather than
    // wait out the deadline (which would also double the cool-down).
    await reopenCutProbes(this.opts.pool, [...this.probes.keys(), ...this.abandoned]).catch(() => undefined);
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
    if (circuit === 'closed' && prev && !prev.paused && prev.openAlertId === null) {
      this.cache.delete(endpoint);
    } else {
      this.cache.set(endpoint, {
        circuit,
        paused: prev?.paused ?? false,
        nextProbeAt: prev?.nextProbeAt ?? null,
        probeDeadline: null,
        openedAt: prev?.openedAt ?? null,
        openAlertId: prev?.openAlertId ?? null,
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
    const next = new Map<string, Cached>();
    const local = (ms: number | null, dbNow: number): number | null => (ms === null ? null : ms - (dbNow - localNow));
    for (const r of rows) {
      next.set(r.endpoint, {
        circuit: r.circuit,
        paused: r.paused,
        nextProbeAt: local(r.next_probe_ms, r.db_now_ms),
        probeDeadline: local(r.probe_deadline_ms, r.db_now_ms),
        openedAt: local(r.opened_ms, r.db_now_ms),
        openAlertId: r.open_alert_id === null ? null : Number(r.open_alert_id),
      });
    }
    const freed = [...this.cache].some(([ep, s]) => (s.paused || s.circuit !== 'closed') && !isHolding(next.get(ep)));
    this.cache = next;
    if (freed) this.runner?.wake(true);
  }

  private async tick(): Promise<void> {
    this.timer = null;
    if (this.stopped || this.ticking) return;
    this.ticking = true;
    try {
      const refreshMs = this.opts.refreshMs ?? 1_000;
      if (this.refreshWanted || Date.now() - this.lastRefresh >= refreshMs) await this.refresh();
      await this.ensureRows();
      if (this.circuitOn) await this.probe();
      await this.expireProbes();
      await this.raiseAlerts();
    } catch (err) {
      this.opts.log.warn({ event: 'endpoint.state_read_error', err: coerceError(err).message }, 'reading endpoint state failed; retrying');
    } finally {
      this.ticking = false;
      this.schedule(this.nextTickIn());
    }
  }

  /** Until the next refresh, or sooner when a probe, a deadline or an alert falls due. */
  private nextTickIn(): number {
    const now = Date.now();
    let at = this.lastRefresh + (this.opts.refreshMs ?? 1_000);
    for (const s of this.cache.values()) {
      if (s.circuit === 'open' && !s.paused && s.nextProbeAt !== null) at = Math.min(at, s.nextProbeAt);
      if (s.circuit === 'half_open' && s.probeDeadline !== null) at = Math.min(at, s.probeDeadline);
      if (s.circuit !== 'closed' && s.openAlertId === null && s.openedAt !== null)
        at = Math.min(at, s.openedAt + this.opts.circuit.alert_after);
    }
    return Math.max(10, at - now + 5);
  }

  /** Claim one probe for each open endpoint configured (and enabled) here whose cool-down is over. */
  private async probe(): Promise<void> {
    const runner = this.runner;
    if (!runner) return;
    const eps = this.opts.endpoints();
    const now = Date.now();
    const due: Array<{ name: string; deadlineMs: number }> = [];
    for (const [name, s] of this.cache) {
      const ep = eps.get(name);
      if (!ep || !ep.enabled || s.circuit !== 'open' || s.paused || s.nextProbeAt === null || s.nextProbeAt > now) continue;
      // The whole attempt: connecting (connect_timeout) comes before the attempt's own timeout starts.
      due.push({ name, deadlineMs: ep.connect_timeout + ep.timeout + PROBE_MARGIN_MS });
    }
    if (due.length === 0) return;
    const jobs = await claimProbes(this.opts.pool, {
      workerId: runner.workerId,
      leaseMs: runner.leaseMs,
      type: WEBHOOK_JOB,
      endpoints: due,
      channel: this.opts.channel,
    });
    for (const job of jobs) {
      this.probes.set(job.id, job.endpoint ?? '');
      const s = this.cache.get(job.endpoint ?? '');
      if (s) s.circuit = 'half_open';
      this.opts.log.info(
        { event: 'endpoint.probe', endpoint: job.endpoint, job_id: job.id },
        `endpoint ${job.endpoint}: probing with one delivery`,
      );
      runner.runClaimed(job);
    }
    // Endpoints with nothing due stay open and are looked at again at the next refresh.
    for (const d of due) {
      const s = this.cache.get(d.name);
      if (s && s.circuit === 'open') s.nextProbeAt = now + (this.opts.refreshMs ?? 1_000);
    }
  }

  /** A half-open circuit whose probe outlived its deadline (its worker died or hung) is open again. */
  private async expireProbes(): Promise<void> {
    const now = Date.now();
    const late = [...this.cache]
      .filter(([, s]) => s.circuit === 'half_open' && s.probeDeadline !== null && s.probeDeadline <= now)
      .map(([n]) => n);
    if (late.length === 0) return;
    const reopened = await reopenLateProbes(this.opts.pool, late, this.opts.circuit, this.opts.channel);
    for (const r of reopened) {
      this.opts.log.warn(
        {
          event: 'endpoint.circuit_opened',
          endpoint: r.endpoint,
          from: 'half_open',
          to: 'open',
          reason: 'probe_deadline',
          cooldown_ms: r.cooldown_ms,
        },
        `endpoint ${r.endpoint}: probe outlived its deadline, circuit open again`,
      );
    }
    if (reopened.length > 0) await this.refresh();
  }

  /**
   * An endpoint open longer than alert_after raises one alert; once closed again, one recovery
   * alert if the first was raised. Each happens in the transaction that marks the row, so exactly once.
   */
  private async raiseAlerts(): Promise<void> {
    const now = Date.now();
    const after = this.opts.circuit.alert_after;
    const owed = [...this.cache].filter(
      ([, s]) =>
        (s.circuit !== 'closed' && s.openAlertId === null && s.openedAt !== null && s.openedAt + after <= now) ||
        (s.circuit === 'closed' && s.openAlertId !== null),
    );
    if (owed.length === 0) return;
    for (const [name] of owed.toSorted(([a], [b]) => (a < b ? -1 : 1))) {
      const raised = await settleCircuitAlert(this.opts.pool, this.opts.alertsChannel, name, after);
      if (raised?.action === 'endpoint.circuit_opened') {
        this.opts.log.warn(
          { event: 'endpoint.alert', endpoint: name, action: raised.action, alert_id: raised.id },
          `endpoint ${name} has been down since ${raised.openedAt?.toISOString()}`,
        );
      } else if (raised) {
        this.opts.log.info(
          { event: 'endpoint.alert', endpoint: name, action: raised.action, alert_id: raised.id },
          `endpoint ${name} has recovered`,
        );
      }
    }
    await this.refresh();
  }
}

function isHolding(s: Cached | undefined): boolean {
  return s !== undefined && (s.paused || s.circuit !== 'closed');
}
