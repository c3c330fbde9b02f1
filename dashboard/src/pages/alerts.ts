import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ALERT_ACTIONS, api, type Alert, type Notification, type Page } from '../api.js';
import { ErrorNote, MoreButton, Table, Time, useAction, usePaged } from '../ui.js';

const LABEL: Record<string, string> = {
  'webhook.dead_letter': 'Webhook dead letter',
  'job.dead_letter': 'Job dead letter',
  'endpoint.circuit_opened': 'Circuit opened',
  'endpoint.circuit_closed': 'Circuit closed',
  'endpoint.expired': 'Held jobs expired',
  'endpoint.failing': 'Endpoint failing',
  'endpoint.failing_resolved': 'Endpoint no longer failing',
};

function describe(a: Alert): VNode {
  const jobId = typeof a.job_id === 'string' ? a.job_id : null;
  const parts = [a.endpoint, a.topic, a.reason ?? a.last_error ?? a.error].filter((x) => typeof x === 'string' && x);
  return html`${jobId ? html`<a href=${`#/jobs/${jobId}`} class="mono">${jobId.slice(0, 8)}</a> ` : null}${parts.join(' · ')}`;
}

/** A notification's data in a line: its job as a link, then its short scalar fields. */
function summary(data: unknown): VNode {
  if (!data || typeof data !== 'object') return html`<code>${JSON.stringify(data)}</code>`;
  const d = data as Record<string, unknown>;
  const jobId = typeof d.job_id === 'string' ? d.job_id : null;
  const shown = (k: string): boolean => typeof d[k] === 'string' || typeof d[k] === 'number';
  const known = ['endpoint', 'topic', 'reason', 'last_error'].filter(shown);
  const keys = known.length > 0 ? known : Object.keys(d).filter((k) => k !== 'job_id' && k !== 'audit_id' && shown(k));
  const parts = keys.slice(0, 4).map((k) => String(d[k]).slice(0, 120));
  return html`${jobId ? html`<a href=${`#/jobs/${jobId}`} class="mono">${jobId.slice(0, 8)}</a> ` : null}${parts.join(' · ')}`;
}

/**
 * Alerts, newest first: the first page from GET /v1/alerts, then live over SSE from the newest one
 * seen (`since`), so nothing falls between the two; EventSource resends Last-Event-ID on a
 * reconnect, so a dropped connection resumes where it stopped.
 */
function LiveAlerts(): VNode {
  const [items, setItems] = useState<Alert[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [state, setState] = useState<'connecting' | 'live' | 'reconnecting'>('connecting');
  const [error, setError] = useState<unknown>(null);
  const [announce, setAnnounce] = useState('');
  const [loaded, setLoaded] = useState(false);
  useEffect(() => {
    let es: EventSource | null = null;
    let closed = false;
    api<Page<Alert>>('GET', 'v1/alerts?limit=50')
      .then((page) => {
        if (closed) return;
        setItems(page.items);
        setNext(page.next_cursor);
        setLoaded(true);
        const since = page.items[0]?.id ?? 0;
        es = new EventSource(since ? `v1/alerts/stream?since=${since}` : 'v1/alerts/stream');
        es.addEventListener('open', () => setState('live'));
        es.addEventListener('error', () => setState('reconnecting'));
        const on = (e: MessageEvent<string>): void => {
          const a = JSON.parse(e.data) as Alert;
          setItems((prev) => (prev.some((p) => p.id === a.id) ? prev : [a, ...prev]));
          setAnnounce(`New alert: ${LABEL[a.action] ?? a.action}`);
        };
        for (const action of ALERT_ACTIONS) es.addEventListener(action, on as EventListener);
      })
      .catch(setError);
    return () => {
      closed = true;
      es?.close();
    };
  }, []);
  const older = (): void => {
    if (!next) return;
    api<Page<Alert>>('GET', `v1/alerts?limit=50&cursor=${encodeURIComponent(next)}`)
      .then((page) => {
        setItems((prev) => [...prev, ...page.items.filter((a) => !prev.some((p) => p.id === a.id))]);
        setNext(page.next_cursor);
      })
      .catch(setError);
  };
  return html`<section aria-labelledby="alerts-h">
    <h2 id="alerts-h">Live alerts <span class=${`sse sse-${state}`} role="status">${state === 'live' ? 'live' : state}</span></h2>
    <p class="sr-only" aria-live="polite">${announce}</p>
    <${ErrorNote} error=${error} />
    <${Table} label="Alerts" head=${['When', 'Alert', 'Details']}>
      ${
        items.length === 0
          ? html`<tr>
              <td colspan="3" class="muted">${loaded ? 'No alerts.' : 'Loading…'}</td>
            </tr>`
          : items.map(
              (a) =>
                html`<tr data-alert-id=${a.id}>
                  <td><${Time} iso=${a.created_at} /></td>
                  <th scope="row">${LABEL[a.action] ?? a.action}</th>
                  <td>${describe(a)}</td>
                </tr>`,
            )
      }
    <//>
    ${next ? html`<p><button type="button" onClick=${older}>Load older alerts</button></p>` : null}
  </section>`;
}

function Notifications({ onRead }: { onRead: () => void }): VNode {
  const paged = usePaged<Notification>('v1/notifications?limit=50');
  const [run, note, busy] = useAction();
  const read = (n: Notification): void =>
    void run(async () => {
      await api('POST', `v1/notifications/${n.id}/read`);
      paged.reload();
      onRead();
      return 'Marked as read.';
    });
  const unread = paged.items.filter((n) => !n.read_at).length;
  return html`<section aria-labelledby="notif-h">
    <h2 id="notif-h">Your notifications <span class="count">${unread}${paged.next ? '+' : ''} unread</span></h2>
    ${note}
    <${ErrorNote} error=${paged.error} />
    <${Table} label="Your notifications" head=${['When', 'Topic', 'Details', '']}>
      ${
        paged.items.length === 0
          ? html`<tr>
              <td colspan="4" class="muted">${paged.loaded ? 'No notifications.' : 'Loading…'}</td>
            </tr>`
          : paged.items.map(
              (n) =>
                html`<tr class=${n.read_at ? 'read' : 'unread'}>
                  <td><${Time} iso=${n.created_at} /></td>
                  <th scope="row"><code>${n.topic}</code></th>
                  <td>${summary(n.data)}</td>
                  <td>
                    ${
                      n.read_at
                        ? html`<span class="muted">read</span>`
                        : html`<button type="button" disabled=${busy} onClick=${() => read(n)}>Mark read</button>`
                    }
                  </td>
                </tr>`,
            )
      }
    <//>
    <${MoreButton} paged=${paged} what="notifications" />
  </section>`;
}

export function AlertsPage({ onRead }: { onRead: () => void }): VNode {
  return html`<h1>Alerts</h1>
    <${LiveAlerts} />
    <${Notifications} onRead=${onRead} />`;
}
