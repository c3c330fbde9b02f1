import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type Endpoint, type Topic } from '../api.js';
import { ErrorNote, Time, useAction } from '../ui.js';

/**
 * The topic catalog (docs/operations.md#topic-catalog): each topic with its description, schema
 * versions, example and the endpoints that subscribe; an admin sends the example to one endpoint
 * as a test delivery.
 */
function SendExample({ topic, endpoints }: { topic: Topic; endpoints: Endpoint[] }): VNode {
  const [run, note, busy] = useAction();
  // Any endpoint may get it (a test ignores the whitelist); the subscribers come first.
  const names = [...topic.endpoints, ...endpoints.map((e) => e.name).filter((n) => !topic.endpoints.includes(n))];
  const [target, setTarget] = useState(names[0] ?? '');
  const id = `send-${topic.name}`;
  if (names.length === 0) return html`<p class="muted small">No endpoint to send the example to.</p>`;
  const send = (e: Event): void => {
    e.preventDefault();
    void run(async () => {
      const r = await api<{ event_id: string; job_ids: string[] }>('POST', `v1/topics/${encodeURIComponent(topic.name)}/send-example`, {
        endpoint: target,
      });
      return `The example of ${topic.name} is on its way to ${target} (job ${r.job_ids[0] ?? '—'}).`;
    });
  };
  return html`<form class="inline" onSubmit=${send}>
    <label for=${id}>Send the example to</label>
    <select id=${id} value=${target} onChange=${(e: Event) => setTarget((e.target as HTMLSelectElement).value)}>
      ${names.map((n) => html`<option value=${n}>${n}</option>`)}
    </select>
    <button type="submit" disabled=${busy}>Send example</button>
    ${note}
  </form>`;
}

function TopicCard({ t, admin, endpoints }: { t: Topic; admin: boolean; endpoints: Endpoint[] }): VNode {
  const last = t.versions[t.versions.length - 1];
  return html`<section class="card topic" aria-labelledby=${`topic-${t.name}`}>
    <h2 id=${`topic-${t.name}`}><code class="topic">${t.name}</code></h2>
    ${t.description ? html`<p>${t.description}</p>` : null}
    <p class="small">
      ${t.archived ? html`<strong>archived</strong> · ` : null}${
        t.deprecated ? html`<strong>deprecated</strong>${t.deprecation_note ? `: ${t.deprecation_note}` : ''} · ` : null
      }validation <strong>${t.effective_validation}</strong> · ${t.source === 'config' ? 'from the config file' : 'created through the API'}
    </p>
    <p class="small">${`Subscribed by: ${t.endpoints.length ? t.endpoints.join(', ') : 'no endpoint'}`}</p>
    <details>
      <summary>Schema versions (${t.versions.length}, latest ${t.version ?? '—'})</summary>
      ${t.versions.toReversed().map(
        (v) =>
          html`<div class="version">
            <h3 class="small">Version ${v.version}, <${Time} iso=${v.created_at} /> by ${v.created_by}</h3>
            <pre>${JSON.stringify(v.schema, null, 2)}</pre>
          </div>`,
      )}
    </details>
    ${
      last
        ? html`<h3 class="small">Example</h3>
            <pre class="example">${JSON.stringify(last.examples[0], null, 2)}</pre>`
        : null
    }
    ${admin && !t.archived && last ? html`<${SendExample} topic=${t} endpoints=${endpoints} />` : null}
  </section>`;
}

export function TopicsPage({ admin }: { admin: boolean }): VNode {
  const [topics, setTopics] = useState<Topic[] | null>(null);
  const [endpoints, setEndpoints] = useState<Endpoint[]>([]);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    Promise.all([api<{ items: Topic[] }>('GET', 'v1/topics'), api<{ items: Endpoint[] }>('GET', 'v1/endpoints')])
      .then(([t, e]) => {
        setTopics(t.items);
        setEndpoints(e.items.filter((x) => x.enabled && !x.paused));
      })
      .catch(setError);
  }, []);
  return html`<h1>Topics</h1>
    <${ErrorNote} error=${error} />
    ${
      topics === null
        ? error
          ? null
          : html`<p class="muted">Loading…</p>`
        : topics.length === 0
          ? html`<p class="muted">No topic is declared: add them under topics.catalog or with <code>acw-webhooks topics add</code>.</p>`
          : topics.map((t) => html`<${TopicCard} t=${t} admin=${admin} endpoints=${endpoints} />`)
    }`;
}
