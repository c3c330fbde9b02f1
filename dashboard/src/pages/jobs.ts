import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiFail, qs, type Job, type JobDetail, type Page } from '../api.js';
import { ErrorNote, MoreButton, navigate, Status, Table, Time, useAction, usePaged } from '../ui.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STATUSES = ['pending', 'running', 'completed', 'dead', 'cancelled'];
const FILTERS = ['status', 'topic', 'endpoint', 'event_id', 'created_after', 'created_before'] as const;

/**
 * Why a pending job waits, in place of its run time, which lies in the past while its endpoint holds
 * it (docs/operations.md#held-jobs): "held: circuit open since …, next probe …", "held: endpoint paused since …"
 * or "held: endpoint disabled".
 */
export function HeldNote({ held }: { held: NonNullable<Job['held']> }): VNode {
  const since = held.since ? html` since <${Time} iso=${held.since} />` : null;
  if (held.reason === 'disabled') return html`<span class="held">held: endpoint disabled</span>`;
  if (held.reason === 'paused') return html`<span class="held">held: endpoint paused${since}</span>`;
  const probe = held.next_probe_at;
  // Built outside the template: htm drops whitespace that holds a line break, as the formatter puts there.
  const state = `held: circuit ${held.circuit.replace('_', '-')}`;
  const next =
    held.circuit === 'half_open'
      ? ', a probe is on its way'
      : !probe
        ? null
        : new Date(probe).getTime() <= Date.now()
          ? ', next probe when a job is due'
          : html`, next probe <${Time} iso=${probe} />`;
  return html`<span class="held">${state}${since}${next}</span>`;
}

export function JobRows({ items, loaded, actions }: { items: Job[]; loaded: boolean; actions?: (j: Job) => VNode }): VNode {
  const head = ['Job', 'Status', 'Topic', 'Endpoint', 'Attempts', 'Created', 'Run at / finished', 'Last error'];
  return html`<${Table} label="Jobs" head=${actions ? [...head, 'Actions'] : head} stack>
    ${
      items.length === 0
        ? html`<tr>
            <td colspan=${head.length + (actions ? 1 : 0)} class="muted">${loaded ? 'No jobs match.' : 'Loading…'}</td>
          </tr>`
        : items.map(
            (j) =>
              html`<tr>
                <th scope="row"><a href=${`#/jobs/${j.id}`} class="mono">${j.id.slice(0, 8)}</a></th>
                <td data-label="Status"><${Status} status=${j.status} /></td>
                <td data-label="Topic">${j.topic ? html`<code>${j.topic}</code>` : html`<span class="muted">${j.type}</span>`}</td>
                <td data-label="Endpoint">${j.endpoint ?? html`<span class="muted">—</span>`}</td>
                <td data-label="Attempts">${j.attempts} / ${j.max_attempts}</td>
                <td data-label="Created"><${Time} iso=${j.created_at} /></td>
                <td data-label="Run at / finished">
                  ${j.status === 'pending' && j.held ? html`<${HeldNote} held=${j.held} />` : html`<${Time} iso=${j.completed_at ?? j.run_at} />`}
                </td>
                <td class="err" data-label="Last error">${j.last_error ?? ''}</td>
                ${actions ? html`<td class="actions" data-label="Actions">${actions(j)}</td>` : null}
              </tr>`,
          )
    }
  <//>`;
}

function FindJob(): VNode {
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const value = String(new FormData(e.target as HTMLFormElement).get('find') ?? '').trim();
    if (!UUID.test(value)) {
      setError('Enter a job id or an event id: a UUID like 0190c3d2-7a4e-7b1c-9f00-2b3c4d5e6f70.');
      return;
    }
    setError(null);
    try {
      // An event id first (a list, empty when it is none), then a job id.
      const page = await api<Page<Job>>('GET', `v1/jobs?event_id=${value}&limit=2`);
      if (page.items.length === 1) return navigate(`#/jobs/${page.items[0]!.id}`);
      if (page.items.length > 1) return navigate(`#/jobs?event_id=${value}`);
      await api('GET', `v1/jobs/${value}`);
      navigate(`#/jobs/${value}`);
    } catch (err) {
      setError(err instanceof ApiFail && err.status === 404 ? `No job has the id or event id ${value}.` : (err as Error).message);
    }
  };
  return html`<form class="find" role="search" onSubmit=${submit} aria-label="Find a job">
    <label for="find">Job id or event id</label>
    <input
      id="find"
      name="find"
      type="search"
      spellcheck="false"
      autocomplete="off"
      class="mono"
      aria-invalid=${error ? 'true' : 'false'}
    />
    <button type="submit">Find</button>
    ${error ? html`<p class="error" role="alert">${error}</p>` : null}
  </form>`;
}

export function JobsPage({ query }: { query: URLSearchParams }): VNode {
  const filter = Object.fromEntries(FILTERS.map((k) => [k, query.get(k) ?? '']));
  const path = `v1/jobs${qs(filter)}`;
  const paged = usePaged<Job>(path);
  const apply = (e: Event): void => {
    e.preventDefault();
    const f = new FormData(e.target as HTMLFormElement);
    navigate(`#/jobs${qs(Object.fromEntries(FILTERS.map((k) => [k, String(f.get(k) ?? '').trim()])))}`);
  };
  const bad = paged.error instanceof ApiFail ? paged.error.field : undefined;
  return html`<h1>Jobs</h1>
    <${FindJob} />
    <form class="filters" onSubmit=${apply} aria-label="Filter jobs" key=${path}>
      <div>
        <label for="f-status">Status</label>
        <select id="f-status" name="status" value=${filter.status}>
          <option value="">any</option>
          ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </div>
      <div>
        <label for="f-topic">Topic</label>
        <input id="f-topic" name="topic" value=${filter.topic} placeholder="e.g. order.created" aria-invalid=${bad === 'topic'} />
      </div>
      <div>
        <label for="f-endpoint">Endpoint</label>
        <input id="f-endpoint" name="endpoint" value=${filter.endpoint} aria-invalid=${bad === 'endpoint'} />
      </div>
      <div>
        <label for="f-event">Event id</label>
        <input id="f-event" name="event_id" value=${filter.event_id} class="mono" aria-invalid=${bad === 'event_id'} />
      </div>
      <div>
        <label for="f-after">Created after</label>
        <input
          id="f-after"
          class="when"
          name="created_after"
          value=${filter.created_after}
          placeholder="1h or 2026-12-01T08:00:00Z"
          aria-describedby="f-time-help"
          aria-invalid=${bad === 'created_after'}
        />
      </div>
      <div>
        <label for="f-before">Created before</label>
        <input
          id="f-before"
          class="when"
          name="created_before"
          value=${filter.created_before}
          placeholder="30m or an RFC 3339 time"
          aria-describedby="f-time-help"
          aria-invalid=${bad === 'created_before'}
        />
      </div>
      <p id="f-time-help" class="muted small">Times: a duration ago (<code>1h</code>, <code>30m</code>) or an RFC 3339 instant.</p>
      <div class="buttons">
        <button type="submit" class="primary">Apply</button>
        <a href="#/jobs" class="button">Clear</a>
      </div>
    </form>
    <${ErrorNote} error=${paged.error} />
    <${JobRows} items=${paged.items} loaded=${paged.loaded || paged.error !== null} />
    <${MoreButton} paged=${paged} what="jobs" />`;
}

/** A webhook job keeps the body it sends as a JSON string: shown parsed, so it reads (and copies) as JSON. */
function pretty(payload: unknown): string {
  const p = payload as { body?: unknown } | null;
  if (p && typeof p === 'object' && typeof p.body === 'string') {
    try {
      return JSON.stringify({ ...p, body: JSON.parse(p.body) as unknown }, null, 2);
    } catch {
      // not JSON: shown as the string it is
    }
  }
  return JSON.stringify(payload ?? null, null, 2);
}

const TERMINAL = new Set(['completed', 'dead', 'cancelled']);

export function JobPage({ id, admin }: { id: string; admin: boolean }): VNode {
  const [job, setJob] = useState<JobDetail | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [copied, setCopied] = useState('');
  const [run, note, busy] = useAction();
  const load = (): void => {
    api<JobDetail>('GET', `v1/jobs/${encodeURIComponent(id)}`)
      .then((j) => {
        setJob(j);
        setError(null);
      })
      .catch(setError);
  };
  useEffect(() => {
    load();
    // A job on its way is followed as it changes; a finished one stays still.
    const t = setInterval(() => {
      if (!job || !TERMINAL.has(job.status)) load();
    }, 2000);
    return () => clearInterval(t);
  }, [id, job?.status]);
  if (!job)
    return html`<h1>Job</h1>
      <${ErrorNote} error=${error} />${error ? null : html`<p role="status">Loading…</p>`}`;
  const payload = pretty(job.payload);
  const copy = (): void => {
    navigator.clipboard
      ?.writeText(payload)
      .then(() => setCopied('Copied.'))
      .catch(() => setCopied('Copying is not allowed here: select the text instead.'));
  };
  const act = (what: 'retry' | 'cancel'): void =>
    void run(async () => {
      await api('POST', `v1/jobs/${job.id}/${what}`);
      load();
      return what === 'retry' ? 'Queued again.' : 'Cancelled.';
    });
  return html`<h1>Job <span class="mono">${job.id}</span></h1>
    <p><a href="#/jobs">← All jobs</a></p>
    <${ErrorNote} error=${error} />
    ${note}
    <dl class="facts">
      <dt>Status</dt>
      <dd><${Status} status=${job.status} /></dd>
      <dt>Topic</dt>
      <dd>${job.topic ?? '—'}</dd>
      <dt>Endpoint</dt>
      <dd>${job.endpoint ?? '—'}</dd>
      <dt>Event id</dt>
      <dd class="mono">${job.event_id ?? '—'}</dd>
      <dt>Attempts</dt>
      <dd>${job.attempts} of ${job.max_attempts}</dd>
      <dt>Created</dt>
      <dd><${Time} iso=${job.created_at} /></dd>
      ${
        job.status === 'pending' && job.held
          ? html`<dt>Held</dt>
              <dd><${HeldNote} held=${job.held} /></dd>`
          : html`<dt>${job.status === 'pending' ? 'Next try' : job.status === 'running' ? 'Started' : 'Finished'}</dt>
              <dd>
                <${Time} iso=${job.status === 'pending' || job.status === 'running' ? job.run_at : (job.completed_at ?? job.run_at)} />
              </dd>`
      }
      ${
        job.last_error
          ? html`<dt>Last error</dt>
              <dd class="err">${job.last_error}</dd>`
          : null
      }
    </dl>
    ${
      admin
        ? html`<div class="actions-bar">
            ${TERMINAL.has(job.status) ? html`<button type="button" class="primary" disabled=${busy} onClick=${() => act('retry')}>Retry</button>` : null}
            ${job.status === 'pending' ? html`<button type="button" class="danger" disabled=${busy} onClick=${() => act('cancel')}>Cancel</button>` : null}
          </div>`
        : null
    }
    <section aria-labelledby="payload-h">
      <h2 id="payload-h">Payload</h2>
      <pre class="payload" tabindex="0" aria-label="Payload">${payload}</pre>
      <button type="button" onClick=${copy}>Copy payload</button> <span role="status">${copied}</span>
    </section>
    <section aria-labelledby="att-h">
      <h2 id="att-h">Attempts</h2>
      <${Table} label="Attempts" head=${['#', 'Series', 'Status code', 'Duration', 'Error', 'Response', 'At']}>
        ${
          job.deliveries.length === 0
            ? html`<tr>
                <td colspan="7" class="muted">No attempt yet.</td>
              </tr>`
            : job.deliveries.map(
                (a) =>
                  html`<tr>
                    <th scope="row">${a.number}</th>
                    <td>${a.series === 0 ? 'original' : `sent again ${a.series}`}, attempt ${a.attempt}</td>
                    <td>${a.status_code ?? html`<span class="muted">${a.error_kind ?? '—'}</span>`}</td>
                    <td>${a.duration_ms} ms</td>
                    <td class="err">${a.error ?? ''}</td>
                    <td><code class="snippet">${(a.response_body ?? '').slice(0, 300)}</code></td>
                    <td><${Time} iso=${a.created_at} /></td>
                  </tr>`,
              )
        }
      <//>
    </section>`;
}
