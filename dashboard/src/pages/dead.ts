import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { api, ApiFail, type Job } from '../api.js';
import { ErrorNote, MoreButton, useAction, usePaged } from '../ui.js';
import { JobRows } from './jobs.js';

interface Filter {
  topic?: string;
  endpoint?: string;
  since?: string;
}

/** Redrive in bulk: a dry run first, its count shown, and nothing re-queued until the user confirms. */
function Redrive({ onDone }: { onDone: () => void }): VNode {
  const [pending, setPending] = useState<{ filter: Filter; count: number } | null>(null);
  const [error, setError] = useState<ApiFail | Error | null>(null);
  const [run, note, busy] = useAction();
  const check = async (e: Event): Promise<void> => {
    e.preventDefault();
    const f = new FormData(e.target as HTMLFormElement);
    const filter: Filter = {};
    for (const k of ['topic', 'endpoint', 'since'] as const) {
      const v = String(f.get(k) ?? '').trim();
      if (v) filter[k] = v;
    }
    try {
      const r = await api<{ count: number }>('POST', 'v1/jobs/redrive', { ...filter, dry_run: true });
      setPending({ filter, count: r.count });
      setError(null);
    } catch (err) {
      setPending(null);
      setError(err as Error);
    }
  };
  const confirm = (): void => {
    if (!pending) return;
    const filter = pending.filter;
    setPending(null);
    void run(async () => {
      const r = await api<{ count: number }>('POST', 'v1/jobs/redrive', filter);
      onDone();
      return `${r.count} dead job${r.count === 1 ? '' : 's'} re-queued.`;
    });
  };
  const bad = error instanceof ApiFail ? error.field : undefined;
  return html`<section aria-labelledby="redrive-h" class="box">
    <h2 id="redrive-h">Redrive in bulk</h2>
    <form class="filters" onSubmit=${check}>
      <div>
        <label for="r-topic">Topic</label>
        <input id="r-topic" name="topic" placeholder="any" aria-invalid=${bad === 'topic'} />
      </div>
      <div>
        <label for="r-endpoint">Endpoint</label>
        <input id="r-endpoint" name="endpoint" placeholder="any" aria-invalid=${bad === 'endpoint'} />
      </div>
      <div>
        <label for="r-since">Dead since</label>
        <input id="r-since" name="since" class="when" placeholder="e.g. 1h or 2026-01-31T00:00:00Z" aria-invalid=${bad === 'since'} />
      </div>
      <div class="buttons"><button type="submit">Count matching</button></div>
    </form>
    <${ErrorNote} error=${error} />
    ${
      pending
        ? html`<div class="confirm" role="alertdialog" aria-labelledby="confirm-text">
            <p id="confirm-text">
              <strong>${pending.count}</strong> dead job${pending.count === 1 ? '' : 's'} match${pending.count === 1 ? 'es' : ''}.
              ${pending.count > 0 ? ' Re-queue them now?' : ''}
            </p>
            ${
              pending.count > 0
                ? html`<button type="button" class="primary" disabled=${busy} onClick=${confirm}>Re-queue ${pending.count}</button>`
                : null
            }
            <button type="button" onClick=${() => setPending(null)}>Cancel</button>
          </div>`
        : null
    }
    ${note}
  </section>`;
}

export function DeadPage({ admin }: { admin: boolean }): VNode {
  const paged = usePaged<Job>('v1/jobs?status=dead');
  const [run, note, busy] = useAction();
  const retry = (j: Job): void =>
    void run(async () => {
      await api('POST', `v1/jobs/${j.id}/retry`);
      paged.reload();
      return `Job ${j.id.slice(0, 8)} queued again.`;
    });
  return html`<h1>Dead letters</h1>
    <p class="muted">Jobs that used up their attempts or were given up. Retrying queues a job again with fresh attempts.</p>
    ${admin ? html`<${Redrive} onDone=${paged.reload} />` : null} ${note}
    <${ErrorNote} error=${paged.error} />
    <div class="actions-bar"><button type="button" onClick=${paged.reload}>Refresh</button></div>
    <${JobRows}
      items=${paged.items}
      loaded=${paged.loaded || paged.error !== null}
      actions=${
        admin
          ? (j: Job) =>
              html`<button type="button" disabled=${busy} onClick=${() => retry(j)} aria-label=${`Retry job ${j.id.slice(0, 8)}`}>
                Retry
              </button>`
          : undefined
      }
    />
    <${MoreButton} paged=${paged} what="dead letters" />`;
}
