import type { AlertAction } from '../admin/alert-actions.js';
import { isSinkEndpoint, sinkEndpointName, type Config, type SinkFormat } from '../config/index.js';
import type { Queryable } from '../db/pool.js';
import { newEventId } from '../notify/event-id.js';
import { enqueueJobs } from '../queue/transitions.js';
import type { NewJob } from '../queue/types.js';
import { WEBHOOK_JOB, type DeliverPayload } from '../webhook/job.js';
import { sinkBody, type SinkAlert } from './body.js';

export type { SinkAlert } from './body.js';

/** Alerts about a sink's own state: they go to the other sinks, each raised once per outage, so they cannot feed themselves. */
const STATE_ACTIONS: ReadonlySet<AlertAction> = new Set([
  'endpoint.circuit_opened',
  'endpoint.circuit_closed',
  'endpoint.failing',
  'endpoint.failing_resolved',
]);

export interface AlertSinksOptions {
  sinks: readonly { name: string; format: SinkFormat }[];
  /** server.public_url: the dashboard links' base; empty: no link. */
  publicUrl: string;
  /** The jobs NOTIFY channel (woken at commit). */
  jobsChannel: string;
  maxAttempts: number;
}

/**
 * The alert sinks (docs/operations.md#alert-sinks) as the code that raises an alert sees them: it
 * calls enqueue() in the transaction that writes the alert, which adds one `webhook.deliver` job
 * per sink to the endpoint `sink:NAME`, its body written now. The alert and its deliveries commit
 * together or not at all, so a process that dies at any point loses none, and nothing reads alerts
 * back by id (ids commit out of order).
 *
 * No loop: an alert about a sink's jobs (one of them dead, or expired) goes to no sink, and an
 * alert about a sink's state (its circuit, failing) goes to the other sinks only. A sink job is
 * thus made only by an alert about a customer endpoint or job, or by a sink's outage, and never by
 * another sink job's fate.
 */
export class AlertSinks {
  constructor(private readonly opts: AlertSinksOptions) {}

  /** The sinks of a config, or null when it has none (the raising code then writes nothing more). */
  static fromConfig(config: Config, jobsChannel: string): AlertSinks | null {
    if (config.alerts.sinks.length === 0) return null;
    return new AlertSinks({
      sinks: config.alerts.sinks.map((s) => ({ name: s.name, format: s.format })),
      publicUrl: config.server.public_url,
      jobsChannel,
      maxAttempts: config.jobs.max_attempts,
    });
  }

  /** The sinks an alert goes to (the rule above). */
  targets(a: SinkAlert): readonly { name: string; format: SinkFormat }[] {
    const ep = a.details['endpoint'];
    const about = typeof ep === 'string' && isSinkEndpoint(ep) ? ep : null;
    if (about === null) return this.opts.sinks;
    if (!STATE_ACTIONS.has(a.action)) return [];
    return this.opts.sinks.filter((s) => sinkEndpointName(s.name) !== about);
  }

  /** The deliveries of these alerts, in the caller's transaction. Answers how many jobs it wrote. */
  async enqueue(db: Queryable, alerts: readonly SinkAlert[]): Promise<number> {
    const jobs: NewJob[] = [];
    for (const a of alerts) {
      for (const s of this.targets(a)) {
        const payload: DeliverPayload = { topic: a.action, body: sinkBody(s.format, a, this.opts.publicUrl) };
        jobs.push({ id: newEventId(), type: WEBHOOK_JOB, payload, maxAttempts: this.opts.maxAttempts, endpoint: sinkEndpointName(s.name) });
      }
    }
    if (jobs.length > 0) await enqueueJobs(db, jobs, this.opts.jobsChannel);
    return jobs.length;
  }
}
