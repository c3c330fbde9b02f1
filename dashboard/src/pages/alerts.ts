import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ALERT_ACTIONS, api, qs, type Alert, type Page } from '../api.js';
import { duration, ErrorNote, navigate, Table, Time, useAction } from '../ui.js';
import { Notifications } from './notifications.js';

const LABEL: Record<string, string> = {
  'webhook.dead_letter': 'Webhook dead letter',
  'job.dead_letter': 'Job dead letter',
  'endpoint.circuit_opened': 'Circuit opened',
  'endpoint.circuit_closed': 'Circuit closed',
  'endpoint.expired': 'Held jobs expired',
  'endpoint.failing': 'Endpoint failing',
  'endpoint.failing_resolved': 'Endpoint no longer failing',
  'topic.event_rejected': 'Outbox event rejected',
  'webhook.key_blocked': 'Ordering key blocked',
};

const num = (a: Alert, k: string): number | null => (typeof a[k] === 'number' ? (a[k] as number) : null);

function describe(a: Alert): VNode {
  const jobId = typeof a.job_id === 'string' ? a.job_id : null;
  const key = typeof a.ordering_key === 'string' ? `key ${a.ordering_key}` : null;
  const parts = [a.endpoint, key, a.topic, a.reason ?? a.last_error ?? a.error].filter((x) => typeof x === 'string' && x) as string[];
  // What a resolving alert says about the condition it ends (docs/operations.md#alerts).
  const down = num(a, 'downtime_ms');
  if (down !== null) parts.push(`down ${duration(down / 1000)}`);
  const held = num(a, 'held_deliveries');
  if (held !== null) parts.push(`${held} deliveries held`);
  const dead = num(a, 'dead_jobs');
  if (dead !== null) parts.push(`${dead} jobs went dead meanwhile`);
  if (Array.isArray(a.status_codes) && a.status_codes.length) parts.push(`answered ${a.status_codes.join(', ')}`);
  if (a.flaps > 0) parts.push(`${a.flaps} flap${a.flaps === 1 ? '' : 's'}`);
  return html`${jobId ? html`<a href=${`#/jobs/${jobId}`} class="mono">${jobId.slice(0, 8)}</a> ` : null}${parts.join(' · ')}`;
}

/** The alert a resolving one ends (circuit closed, no longer failing), if it names it. */
const resolves = (a: Alert): number | null => num(a, 'open_alert_id') ?? num(a, 'failing_alert_id');

interface Filter {
  state: string;
  acknowledged: string;
}

const matches = (a: Alert, f: Filter): boolean =>
  (!f.state || a.state === f.state) && (!f.acknowledged || (a.acknowledged_at !== null) === (f.acknowledged === 'true'));

function StateCell({ a }: { a: Alert }): VNode {
  return html`<span class=${`badge a-${a.state}`}>${a.state}</span>
    ${a.acknowledged_at ? html`<div class="muted small">seen by ${a.acknowledged_by ?? 'someone'} <${Time} iso=${a.acknowledged_at} /></div>` : null}`;
}

/**
 * Alerts, newest first: the first page from GET /v1/alerts (filtered by state and acknowledgement),
 * then live over SSE from the newest one seen (`since`), so nothing falls between the two;
 * EventSource resends Last-Event-ID on a reconnect, so a dropped connection resumes where it stopped.
 */
function LiveAlerts({ filter, admin }: { filter: Filter; admin: boolean }): VNode {
  const [items, setItems] = useState<Alert[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [state, setState] = useState<'connecting' | 'live' | 'reconnecting'>('connecting');
  const [error, setError] = useState<unknown>(null);
  const [announce, setAnnounce] = useState('');
  const [loaded, setLoaded] = useState(false);
  const [gen, setGen] = useState(0);
  const [run, note, busy] = useAction();
  /** The newest alert this page has been told of, whatever the filter: "acknowledge all" goes up to it, no further. */
  const newest = useRef(0);
  const path = `v1/alerts${qs({ limit: 50, state: filter.state, acknowledged: filter.acknowledged })}`;
  useEffect(() => {
    let es: EventSource | null = null;
    let closed = false;
    setLoaded(false);
    // The newest alert of all first, then the page: one raised between the two reads is in both, and shown once.
    api<Page<Alert>>('GET', 'v1/alerts?limit=1')
      .then(async (top) => [await api<Page<Alert>>('GET', path), top] as const)
      .then(([page, top]) => {
        if (closed) return;
        setItems(page.items);
        setNext(page.next_cursor);
        setLoaded(true);
        // The stream starts after the newest alert of all, not of the filter: older ones are in the page.
        const since = top.items[0]?.id ?? 0;
        newest.current = Math.max(newest.current, since);
        es = new EventSource(since ? `v1/alerts/stream?since=${since}` : 'v1/alerts/stream');
        es.addEventListener('open', () => setState('live'));
        es.addEventListener('error', () => setState('reconnecting'));
        const on = (e: MessageEvent<string>): void => {
          const a = JSON.parse(e.data) as Alert;
          newest.current = Math.max(newest.current, a.id);
          const ended = resolves(a);
          setItems((prev) => {
            // The alert this one resolves reads resolved now (and leaves a list of open ones).
            let list =
              ended === null
                ? prev
                : prev.map((p) =>
                    p.id === ended ? { ...p, state: 'resolved' as const, resolved_at: a.created_at, resolved_by: a.id } : p,
                  );
            list = list.filter((p) => matches(p, filter));
            return matches(a, filter) && !list.some((p) => p.id === a.id) ? [a, ...list] : list;
          });
          setAnnounce(`New alert: ${LABEL[a.action] ?? a.action}`);
        };
        for (const action of ALERT_ACTIONS) es.addEventListener(action, on as EventListener);
      })
      .catch(setError);
    return () => {
      closed = true;
      es?.close();
    };
  }, [path, gen]);
  const older = (): void => {
    if (!next) return;
    api<Page<Alert>>('GET', `${path}&cursor=${encodeURIComponent(next)}`)
      .then((page) => {
        setItems((prev) => [...prev, ...page.items.filter((a) => !prev.some((p) => p.id === a.id))]);
        setNext(page.next_cursor);
      })
      .catch(setError);
  };
  const ack = (a: Alert): void =>
    void run(async () => {
      const done = await api<Alert>('POST', `v1/alerts/${a.id}/ack`);
      setItems((prev) => prev.map((p) => (p.id === a.id ? done : p)).filter((p) => matches(p, filter)));
      return `Alert ${a.id} acknowledged.`;
    });
  const ackAll = (): void =>
    void run(async () => {
      const r = await api<{ acknowledged: number; up_to: number }>(
        'POST',
        'v1/alerts/ack',
        newest.current ? { up_to: newest.current } : {},
      );
      setGen((g) => g + 1);
      return r.acknowledged === 0 ? 'Nothing to acknowledge.' : `${r.acknowledged} alert${r.acknowledged === 1 ? '' : 's'} acknowledged.`;
    });
  const head = ['When', 'Alert', 'Details', 'State'];
  return html`<section aria-labelledby="alerts-h">
    <h2 id="alerts-h">Live alerts <span class=${`sse sse-${state}`} role="status">${state === 'live' ? 'live' : state}</span></h2>
    <p class="sr-only" aria-live="polite">${announce}</p>
    <form class="filters" aria-label="Filter alerts" onSubmit=${(e: Event) => e.preventDefault()}>
      <div>
        <label for="a-state">State</label>
        <select
          id="a-state"
          value=${filter.state}
          onChange=${(e: Event) => go({ ...filter, state: (e.target as HTMLSelectElement).value })}
        >
          <option value="">any</option>
          <option value="open">open</option>
          <option value="resolved">resolved</option>
        </select>
      </div>
      <div>
        <label for="a-ack">Acknowledged</label>
        <select
          id="a-ack"
          value=${filter.acknowledged}
          onChange=${(e: Event) => go({ ...filter, acknowledged: (e.target as HTMLSelectElement).value })}
        >
          <option value="">either</option>
          <option value="false">not yet</option>
          <option value="true">yes</option>
        </select>
      </div>
      ${
        admin
          ? html`<div class="buttons">
              <button type="button" disabled=${busy} onClick=${ackAll}>Acknowledge all</button>
            </div>`
          : null
      }
    </form>
    ${note}
    <${ErrorNote} error=${error} />
    <${Table} label="Alerts" head=${admin ? [...head, ''] : head}>
      ${
        items.length === 0
          ? html`<tr>
              <td colspan=${admin ? 5 : 4} class="muted">${loaded ? 'No alerts.' : 'Loading…'}</td>
            </tr>`
          : items.map(
              (a) =>
                html`<tr data-alert-id=${a.id}>
                  <td><${Time} iso=${a.created_at} /></td>
                  <th scope="row">${LABEL[a.action] ?? a.action}</th>
                  <td>${describe(a)}</td>
                  <td><${StateCell} a=${a} /></td>
                  ${
                    admin
                      ? html`<td>
                          ${
                            a.acknowledged_at
                              ? null
                              : html`<button
                                  type="button"
                                  disabled=${busy}
                                  onClick=${() => ack(a)}
                                  aria-label=${`Acknowledge alert ${a.id}`}
                                >
                                  Acknowledge
                                </button>`
                          }
                        </td>`
                      : null
                  }
                </tr>`,
            )
      }
    <//>
    ${next ? html`<p><button type="button" onClick=${older}>Load older alerts</button></p>` : null}
  </section>`;
}

/** The filter lives in the URL (`#/alerts?state=open`), so a view can be linked to and survives a sign-in. */
function go(f: Filter): void {
  navigate(`#/alerts${qs({ state: f.state, acknowledged: f.acknowledged })}`);
}

export function AlertsPage({ onRead, admin, query }: { onRead: () => void; admin: boolean; query: URLSearchParams }): VNode {
  const filter: Filter = { state: query.get('state') ?? '', acknowledged: query.get('acknowledged') ?? '' };
  return html`<h1>Alerts</h1>
    <${LiveAlerts} filter=${filter} admin=${admin} />
    <${Notifications} onRead=${onRead} />`;
}
