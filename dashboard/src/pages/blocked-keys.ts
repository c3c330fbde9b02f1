import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type BlockedKey } from '../api.js';
import { ErrorNote, Table, Time, useAction } from '../ui.js';

/**
 * Ordering keys held behind their dead head (docs/operations.md#blocked-keys), with the admin's two
 * actions: send the head again (first), or skip it and let the key go on. Shown only when there are some.
 */
export function BlockedKeys({ admin }: { admin: boolean }): VNode | null {
  const [items, setItems] = useState<BlockedKey[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [run, note, busy] = useAction();
  const load = (): void => {
    api<{ items: BlockedKey[] }>('GET', 'v1/ordering/blocked')
      .then((r) => {
        setItems(r.items);
        setError(null);
      })
      .catch(setError);
  };
  useEffect(() => {
    load();
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, []);
  const act = (k: BlockedKey, what: 'retry-head' | 'skip-head'): void => {
    void run(async () => {
      await api('POST', `v1/ordering/blocked/${what}`, { endpoint: k.endpoint, ordering_key: k.ordering_key });
      load();
      return what === 'retry-head'
        ? `The head of ${k.ordering_key} goes to ${k.endpoint} again, first.`
        : `The head of ${k.ordering_key} stays dead; the key goes on.`;
    });
  };
  if (items.length === 0 && !error && !note) return null;
  const head = ['Ordering key', 'Endpoint', 'Blocked since', 'Waiting', 'Last error of its head'];
  return html`<section aria-labelledby="blocked-h">
    <h2 id="blocked-h">Blocked ordering keys</h2>
    <p class="muted">A strict endpoint holds a key whose head went dead until it is retried or skipped.</p>
    <${ErrorNote} error=${error} />
    ${note}
    <${Table} label="Blocked ordering keys" head=${admin ? [...head, 'Actions'] : head} stack>
      ${items.map(
        (k) =>
          html`<tr>
            <th scope="row" data-label="Ordering key">
              <code>${k.ordering_key}</code>
              <div class="small"><a href=${`#/jobs/${k.head_job_id}`} class="mono">${k.head_job_id.slice(0, 8)}</a></div>
            </th>
            <td data-label="Endpoint">${k.endpoint}</td>
            <td data-label="Blocked since"><${Time} iso=${k.blocked_at} /></td>
            <td data-label="Waiting">${k.waiting}${k.waiting_capped ? '+' : ''}</td>
            <td class="err" data-label="Last error">${k.last_error ?? html`<span class="muted">none</span>`}</td>
            ${
              admin
                ? html`<td class="actions" data-label="Actions">
                    <button
                      type="button"
                      disabled=${busy}
                      onClick=${() => act(k, 'retry-head')}
                      aria-label=${`Retry the head of ${k.ordering_key}`}
                    >
                      Retry head
                    </button>
                    <button
                      type="button"
                      disabled=${busy}
                      onClick=${() => act(k, 'skip-head')}
                      aria-label=${`Skip the head of ${k.ordering_key}`}
                    >
                      Skip head
                    </button>
                  </td>`
                : null
            }
          </tr>`,
      )}
    <//>
  </section>`;
}
