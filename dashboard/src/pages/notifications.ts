// The signed-in user's own inbox (GET /v1/notifications), with mark-as-read.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { api, type Notification } from '../api.js';
import { ErrorNote, MoreButton, Table, Time, useAction, usePaged } from '../ui.js';

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

export function Notifications({ onRead }: { onRead: () => void }): VNode {
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
