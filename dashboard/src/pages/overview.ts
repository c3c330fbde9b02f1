import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type Endpoint, type Stats, type WorkerProcess } from '../api.js';
import { DeliveriesChart } from '../chart.js';
import { duration, ErrorNote, Table, Time } from '../ui.js';
import { AttentionBox, byHealth } from './endpoint-health.js';
import { EndpointsTable } from './endpoints.js';

const CARDS: Array<[key: Exclude<keyof Stats['queue'], 'estimated'>, status: string, label: string]> = [
  ['pending', 'pending', 'pending'],
  ['running', 'running', 'running'],
  ['dead', 'dead', 'dead'],
  ['completed_24h', 'completed', 'completed (24 h)'],
  ['cancelled_24h', 'cancelled', 'cancelled (24 h)'],
];

/**
 * A queue count as the card shows it. Past 1,000 pending or dead jobs the server estimates the
 * figure from PostgreSQL's table statistics and names it in `queue.estimated` (docs/operations.md,
 * GET /v1/stats): shown as "≈ n", so an operator does not read it as an exact count.
 */
function count(queue: Stats['queue'], key: Exclude<keyof Stats['queue'], 'estimated'>): VNode | string {
  const n = (queue[key] ?? 0).toLocaleString();
  if (!(queue.estimated as string[] | undefined)?.includes(key)) return n;
  return html`<span title="An estimate from PostgreSQL's table statistics: counted exactly up to 1,000">≈ ${n}</span>`;
}

function ProcessesTable({ items }: { items: WorkerProcess[] }): VNode {
  return html`<${Table} label="Processes" head=${['Process', 'State', 'Version', 'Started', 'Last seen', 'In flight', 'Runners']} stack>
    ${items.map(
      (p) =>
        html`<tr class=${p.gone ? 'gone' : ''}>
          <th scope="row">
            <span class="name">${p.mode} ${p.host}:${p.pid}</span>
            <div class="muted small">${p.id}${p.jobs ? '' : ', jobs off'}</div>
          </th>
          <td data-label="State">
            ${p.gone ? html`<span class="badge s-dead">gone</span>` : html`<span class="badge s-completed">running</span>`}
          </td>
          <td data-label="Version">${p.version}</td>
          <td data-label="Started"><${Time} iso=${p.started_at} /></td>
          <td data-label="Last seen"><${Time} iso=${p.last_seen} /></td>
          <td data-label="In flight">${p.in_flight}</td>
          <td data-label="Runners">
            ${p.runners.length ? p.runners.map((r) => html`<code class="topic">${r}</code> `) : html`<span class="muted">none</span>`}
          </td>
        </tr>`,
    )}
  <//>`;
}

export function OverviewPage({ admin }: { admin: boolean }): VNode {
  const [hour, setHour] = useState<Stats | null>(null);
  const [day, setDay] = useState<Stats | null>(null);
  const [endpoints, setEndpoints] = useState<Endpoint[] | null>(null);
  const [processes, setProcesses] = useState<WorkerProcess[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = (): void => {
    Promise.all([
      api<Stats>('GET', 'v1/stats?window=1h'),
      api<Stats>('GET', 'v1/stats?window=24h'),
      api<{ items: Endpoint[] }>('GET', 'v1/endpoints'),
      api<{ items: WorkerProcess[] }>('GET', 'v1/workers'),
    ])
      .then(([h, d, e, w]) => {
        setHour(h);
        setDay(d);
        setEndpoints(byHealth(e.items));
        setProcesses(w.items);
        setError(null);
      })
      .catch(setError);
  };
  useEffect(() => {
    load();
    const t = setInterval(load, 15_000);
    return () => clearInterval(t);
  }, []);
  // As notify's warning: no live process runs jobs, so nothing is delivered (a gone row is 30 s unseen).
  const noWorker = processes !== null && !processes.some((p) => p.jobs && !p.gone);
  return html`<h1>Overview</h1>
    <${ErrorNote} error=${error} />
    ${endpoints ? html`<${AttentionBox} items=${endpoints} id="open-h" />` : null}
    ${
      noWorker
        ? html`<section aria-labelledby="noworker-h" class="warn-box">
            <h2 id="noworker-h">No worker running</h2>
            <p>No process that runs jobs is up: events are recorded, their jobs wait until one runs (acw-webhooks serve or worker).</p>
          </section>`
        : null
    }
    ${
      hour
        ? html`<section aria-labelledby="queue-h">
            <h2 id="queue-h">Queue</h2>
            <dl class="cards">
              ${CARDS.map(
                ([key, status, label]) =>
                  html`<div class="card">
                    <dt><a href=${`#/jobs?status=${status}`}>${label}</a></dt>
                    <dd>${count(hour.queue, key)}</dd>
                  </div>`,
              )}
              <div class="card">
                <dt>Oldest due job</dt>
                <dd>
                  ${hour.oldest_due ? html`<span title=${hour.oldest_due.run_at}>${duration(hour.oldest_due.age_seconds)}</span>` : 'none'}
                </dd>
              </div>
            </dl>
          </section>`
        : html`<p role="status">Loading…</p>`
    }
    ${
      hour && day
        ? html`<section aria-labelledby="del-h">
            <h2 id="del-h">Deliveries</h2>
            <p>
              Last hour: ${hour.deliveries.total.toLocaleString()} attempts, ${(100 * hour.deliveries.failure_rate).toFixed(1)}% failed.
              Last 24 h: ${day.deliveries.total.toLocaleString()} attempts, ${(100 * day.deliveries.failure_rate).toFixed(1)}% failed.
            </p>
            <div class="charts">
              <${DeliveriesChart} stats=${hour} label="Last hour (per minute)" />
              <${DeliveriesChart} stats=${day} label="Last 24 hours (15-minute buckets)" />
            </div>
          </section>`
        : null
    }
    ${
      endpoints
        ? html`<section aria-labelledby="ep-h">
            <h2 id="ep-h">Endpoints</h2>
            <${EndpointsTable} items=${endpoints} admin=${admin} onChange=${load} />
          </section>`
        : null
    }
    ${
      processes
        ? html`<section aria-labelledby="proc-h">
            <h2 id="proc-h">Processes</h2>
            ${processes.length > 0 ? html`<${ProcessesTable} items=${processes} />` : html`<p class="muted">No serve or worker process is registered.</p>`}
          </section>`
        : null
    }`;
}
