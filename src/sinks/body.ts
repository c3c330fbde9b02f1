import type { AlertAction } from '../admin/alert-actions.js';
import { formatDuration, isSinkEndpoint, type SinkFormat } from '../config/index.js';

/**
 * What an alert sink is sent (docs/operations.md#alert-sinks): the alert as it was raised, in the
 * sink's format. Written once, in the transaction that raises the alert, and stored with the job,
 * so every retry sends the same bytes.
 */

/** An alert as its raising statement wrote it: the audit row's id, action, time and details. */
export interface SinkAlert {
  id: number;
  action: AlertAction;
  createdAt: Date;
  details: Readonly<Record<string, unknown>>;
}

export type Severity = 'critical' | 'warning' | 'info';

/** critical: deliveries wait or are lost now; warning: one job is lost; info: a condition ended. */
export const SEVERITY: Readonly<Record<AlertAction, Severity>> = {
  'endpoint.circuit_opened': 'critical',
  'endpoint.failing': 'critical',
  'endpoint.expired': 'critical',
  'webhook.dead_letter': 'warning',
  'job.dead_letter': 'warning',
  'topic.event_rejected': 'warning',
  'endpoint.circuit_closed': 'info',
  'endpoint.failing_resolved': 'info',
  'webhook.key_blocked': 'critical',
};

const RESOLVES: Partial<Record<AlertAction, string>> = {
  'endpoint.circuit_closed': 'open_alert_id',
  'endpoint.failing_resolved': 'failing_alert_id',
};

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const short = (v: unknown, max = 200): string => {
  const s = str(v) ?? '';
  return s.length > max ? `${s.slice(0, max)}…` : s;
};
const took = (ms: unknown): string => {
  const n = num(ms);
  return n === null || n < 0 ? '?' : formatDuration(Math.round(n / 1000) * 1000 || 0);
};

/** One line saying what happened, for a person. */
export function summary(a: SinkAlert): string {
  const d = a.details;
  const ep = str(d['endpoint']) ?? '?';
  switch (a.action) {
    case 'endpoint.circuit_opened': {
      const flaps = num(d['flaps']) ?? 0;
      const err = short(d['last_error']);
      return (
        `endpoint ${ep} is down since ${str(d['opened_at']) ?? '?'}: its circuit is open and its deliveries are held` +
        `${flaps > 0 ? ` (${flaps} flap${flaps === 1 ? '' : 's'})` : ''}${err ? `; last error: ${err}` : ''}`
      );
    }
    case 'endpoint.circuit_closed': {
      const held = num(d['held_deliveries']) ?? 0;
      return `endpoint ${ep} has recovered after ${took(d['downtime_ms'])} down; ${held} held deliveries resume`;
    }
    case 'endpoint.failing': {
      const codes = Array.isArray(d['status_codes']) ? (d['status_codes'] as unknown[]).join(', ') : '';
      return `endpoint ${ep} is failing: at least half of its last ${num(d['min_attempts']) ?? '?'} deliveries were refused (${codes})`;
    }
    case 'endpoint.failing_resolved':
      return `endpoint ${ep} is no longer failing; ${num(d['dead_jobs']) ?? 0} of its jobs went dead meanwhile`;
    case 'endpoint.expired':
      return `${num(d['count']) ?? '?'} held deliveries to endpoint ${ep} went dead: older than notify.webhook.max_age (${took(d['max_age_ms'])})`;
    case 'webhook.dead_letter':
      return (
        `delivery ${str(d['job_id']) ?? '?'} of ${str(d['topic']) ?? '?'} to endpoint ${ep} went dead after ` +
        `${num(d['attempts']) ?? '?'} attempts (${str(d['reason']) ?? '?'}): ${short(d['last_error'])}`
      );
    case 'topic.event_rejected':
      return `outbox event ${str(d['event_id']) ?? '?'} of ${str(d['topic']) ?? '?'} was rejected, delivered to no one: ${short(
        Array.isArray(d['problems']) ? (d['problems'] as unknown[]).join('; ') : '',
      )}`;
    case 'webhook.key_blocked':
      return (
        `ordering key ${short(d['ordering_key'], 80)} of endpoint ${ep} is blocked: its head ${str(d['job_id']) ?? '?'} went dead ` +
        `(strict ordering); retry or skip the head to let the rest go: ${short(d['last_error'])}`
      );
    case 'job.dead_letter':
      return (
        `job ${str(d['job_id']) ?? '?'} (${str(d['type']) ?? '?'}) went dead after ${num(d['attempts']) ?? '?'} attempts ` +
        `(${str(d['reason']) ?? '?'}): ${short(d['last_error'])}`
      );
  }
}

/**
 * The dashboard page for the alert under `server.public_url`: a dead job's page, the endpoints
 * page for an endpoint's alert (the jobs of an alert sink's endpoint, which the endpoints page does
 * not list). Null without a public URL: the listen address is rarely one a chat reader can open.
 */
export function dashboardLink(a: SinkAlert, publicUrl: string): string | null {
  if (publicUrl === '') return null;
  const jobId = str(a.details['job_id']);
  const ep = str(a.details['endpoint']);
  let page: string;
  if (jobId !== null && (a.action === 'webhook.dead_letter' || a.action === 'job.dead_letter')) page = `/jobs/${encodeURIComponent(jobId)}`;
  else if (isSinkEndpoint(ep)) page = `/jobs?endpoint=${encodeURIComponent(ep ?? '')}`;
  else page = '/endpoints';
  const base = publicUrl.replace(/#.*$/, '');
  return `${base.endsWith('/') ? base : `${base}/`}#${page}`;
}

/** The `webhook` format: the alert as JSON (docs/operations.md#alert-sinks shows one). */
export function webhookBody(a: SinkAlert, publicUrl: string): string {
  const d = a.details;
  const resolvesKey = RESOLVES[a.action];
  const resolution =
    resolvesKey === undefined
      ? null
      : a.action === 'endpoint.circuit_closed'
        ? {
            resolves: num(d[resolvesKey]),
            opened_at: d['opened_at'] ?? null,
            closed_at: d['closed_at'] ?? null,
            downtime_ms: d['downtime_ms'] ?? null,
            held_deliveries: d['held_deliveries'] ?? null,
            flaps: d['flaps'] ?? null,
          }
        : {
            resolves: num(d[resolvesKey]),
            since: d['since'] ?? null,
            until: d['until'] ?? null,
            dead_jobs: d['dead_jobs'] ?? null,
            status_codes: d['status_codes'] ?? null,
          };
  return JSON.stringify({
    alert_id: a.id,
    kind: a.action,
    severity: SEVERITY[a.action],
    // As raised: a resolution is resolved from the start; any other alert is open until it is resolved or acknowledged.
    state: resolution === null ? 'open' : 'resolved',
    created_at: a.createdAt.toISOString(),
    summary: summary(a),
    endpoint: str(d['endpoint']),
    job_id: str(d['job_id']),
    resolution,
    details: d,
    dashboard_url: dashboardLink(a, publicUrl),
  });
}

/** The `slack` format: an incoming-webhook body, one line of `text` with the dashboard link (Slack's `<url|label>`). */
export function slackBody(a: SinkAlert, publicUrl: string): string {
  const link = dashboardLink(a, publicUrl);
  const mark = SEVERITY[a.action] === 'info' ? 'resolved' : SEVERITY[a.action];
  // Slack reads &, < and > as markup: escaped in what we did not write.
  const text = `[${mark}] ${summary(a)}`.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  return JSON.stringify({ text: link === null ? text : `${text} <${link}|open in the dashboard>` });
}

export function sinkBody(format: SinkFormat, a: SinkAlert, publicUrl: string): string {
  return format === 'slack' ? slackBody(a, publicUrl) : webhookBody(a, publicUrl);
}
