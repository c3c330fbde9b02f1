import type pg from 'pg';
import { coerceError } from '../errors.js';
import { EveryMinute, refusesWrites } from '../log-throttle.js';
import { silentLogger, type Logger } from '../log.js';

/**
 * Periodic runners. Each has its own interval; one that throws logs `runner.error` and never stops
 * the others. A `cluster` runner runs once per interval across every replica: each run is claimed
 * on its `runner_state` row, so N processes do the work once, and a 24 h purge still runs when
 * processes restart more often than that.
 */
export interface RunnerContext {
  pool: pg.Pool;
  log: Logger;
  signal: AbortSignal;
  /** The runner's `jobs.<name>` block from the config, when it has one (docs/integrate.md#periodic-runners): its own keys as written. */
  config?: Readonly<Record<string, unknown>>;
}

export interface PeriodicRunner {
  name: string;
  intervalMs: number;
  /** Once per interval for the whole cluster (claimed in `runner_state`), or in every process. */
  cluster: boolean;
  run(ctx: RunnerContext): Promise<void>;
}

/** Claim this interval's run of a cluster runner; true when this process got it. */
export async function claimRunnerTurn(db: pg.Pool | pg.ClientBase, name: string, intervalMs: number, slackMs = 0): Promise<boolean> {
  await db.query({
    name: 'acw_runner_init',
    text: `insert into runner_state (name) values ($1) on conflict (name) do nothing`,
    values: [name],
  });
  const res = await db.query({
    name: 'acw_runner_claim',
    text: `update runner_state set last_run_at = now()
      where name = $1 and last_run_at <= now() - ($2::float8 - $3::float8) * interval '1 millisecond' returning name`,
    values: [name, intervalMs, slackMs],
  });
  return (res.rowCount ?? 0) > 0;
}

/** setTimeout's ceiling (about 24.8 days); a longer interval just checks again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class Scheduler {
  private readonly runners: PeriodicRunner[] = [];
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly active = new Set<Promise<void>>();
  private readonly ctl = new AbortController();
  private readonly refusals = new EveryMinute();
  private started = false;
  private readonly log: Logger;

  constructor(
    private readonly opts: {
      pool: pg.Pool;
      log?: Logger;
      /** Metrics hook: a run failed (after its runner.error line). */
      onError?: (runner: string, err: Error) => void;
    },
  ) {
    this.log = opts.log ?? silentLogger;
  }

  /** Add a runner; the public way for an embedding application to schedule its own work. */
  register(runner: PeriodicRunner): this {
    if (this.runners.some((r) => r.name === runner.name)) throw new Error(`runner ${runner.name} is registered twice`);
    if (!(runner.intervalMs > 0)) throw new Error(`runner ${runner.name}: interval must be above zero`);
    this.runners.push(runner);
    if (this.started) this.arm(runner, 0);
    return this;
  }

  /** The registered runners' names (the process registry shows them). */
  get names(): string[] {
    return this.runners.map((r) => r.name);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    for (const r of this.runners) this.arm(r, 0);
  }

  /** How often a cluster runner asks for its turn: often enough to run close to its interval. */
  private checkEvery(r: PeriodicRunner): number {
    return r.cluster ? Math.min(Math.max(r.intervalMs / 4, 5), 60_000) : r.intervalMs;
  }

  private arm(r: PeriodicRunner, delay: number): void {
    if (this.ctl.signal.aborted) return;
    const t = setTimeout(
      () => {
        const p = this.tick(r).finally(() => {
          this.active.delete(p);
          this.arm(r, this.checkEvery(r));
        });
        this.active.add(p);
      },
      Math.min(delay, MAX_TIMER_MS),
    );
    t.unref();
    this.timers.set(r.name, t);
  }

  private async tick(r: PeriodicRunner): Promise<void> {
    const log = this.log.child({ runner: r.name });
    try {
      if (r.cluster) {
        const slack = this.checkEvery(r) / 2;
        if (!(await claimRunnerTurn(this.opts.pool, r.name, r.intervalMs, slack))) return;
      }
      await r.run({ pool: this.opts.pool, log, signal: this.ctl.signal });
      this.refusals.reset(r.name);
    } catch (err) {
      const e = coerceError(err);
      // A database refusing writes fails every tick until fixed: said once a minute, with the count skipped.
      const skipped = refusesWrites(err) ? this.refusals.pass(r.name) : 0;
      if (skipped !== undefined)
        log.error({ event: 'runner.error', err: e.message, ...(skipped > 0 ? { repeated: skipped } : {}) }, 'periodic runner failed');
      this.opts.onError?.(r.name, e);
    }
  }

  /** Run one runner now, outside its schedule (tests, operators). */
  async runNow(name: string): Promise<void> {
    const r = this.runners.find((x) => x.name === name);
    if (!r) throw new Error(`no runner named ${name}`);
    await r.run({ pool: this.opts.pool, log: this.log.child({ runner: r.name }), signal: this.ctl.signal });
  }

  async stop(): Promise<void> {
    this.ctl.abort();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled(this.active);
  }
}
