// Creating and editing a stored endpoint (docs/operations.md#endpoints-at-run-time).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { api, type Endpoint } from '../api.js';
import { Field, fieldOf, FormError } from './form-parts.js';

/** A rate limit per second as the API takes it back: "20/s", or per minute when that is a whole number. */
const rateText = (r: number | null): string => (r === null ? '' : Number.isInteger(r) ? `${r}/s` : `${Math.round(r * 60)}/min`);

const FIELDS = ['name', 'url', 'topics', 'description', 'scheme', 'timeout', 'max_in_flight', 'rate_limit', 'propagate_trace', 'enabled'];

/** propagate_trace as the select shows it: "" follows the service's default (null). */
const traceText = (v: boolean | null): string => (v === null ? '' : String(v));

/** Create (no endpoint) or edit an endpoint; an edit sends only the fields changed. */
export function EndpointForm({
  endpoint,
  onSaved,
  onCancel,
}: {
  endpoint?: Endpoint;
  onSaved: (e: Endpoint & { secret?: string }) => void;
  onCancel: () => void;
}): VNode {
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const x = endpoint ? 'e' : 'c';
  const initial: Record<string, string> = endpoint
    ? {
        url: endpoint.url,
        topics: endpoint.topics.join(', '),
        description: endpoint.description,
        scheme: endpoint.scheme,
        timeout: `${endpoint.timeout_ms}ms`,
        max_in_flight: String(endpoint.max_in_flight),
        rate_limit: rateText(endpoint.rate_limit),
        propagate_trace: traceText(endpoint.propagate_trace),
        enabled: String(endpoint.enabled),
      }
    : {};
  const submit = async (ev: Event): Promise<void> => {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    const body: Record<string, unknown> = {};
    for (const k of FIELDS) {
      const v = k === 'enabled' ? String(f.get(k) === 'on') : String(f.get(k) ?? '').trim();
      if (k === 'enabled' && !endpoint) continue;
      if (endpoint ? v === (initial[k] ?? '') : v === '') continue;
      if (k === 'topics')
        body[k] = v
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean);
      else if (k === 'max_in_flight') body[k] = v === '' ? undefined : Number(v);
      else if (k === 'enabled') body[k] = v === 'true';
      else if (k === 'rate_limit') body[k] = v === '' ? null : v;
      else if (k === 'propagate_trace') body[k] = v === '' ? null : v === 'true';
      else if (v !== '' || k === 'description') body[k] = v;
    }
    setBusy(true);
    try {
      const r = endpoint
        ? await api<Endpoint>('PATCH', `v1/endpoints/${encodeURIComponent(endpoint.name)}`, body)
        : await api<Endpoint & { secret: string }>('POST', 'v1/endpoints', body);
      setErr(null);
      onSaved(r);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  const title = endpoint ? `Edit ${endpoint.name}` : 'Create an endpoint';
  return html`<section aria-labelledby=${`${x}-h`} class="box">
    <h2 id=${`${x}-h`}>${title}</h2>
    <form class="filters" onSubmit=${submit}>
      ${endpoint ? null : html`<${Field} id="c-name" name="name" label="Name" err=${err} placeholder="e.g. billing" required />`}
      <${Field} id=${`${x}-url`} name="url" label="URL" value=${initial.url} err=${err} placeholder="https://…" required />
      <${Field}
        id=${`${x}-topics`}
        name="topics"
        label="Topics (comma-separated)"
        value=${initial.topics}
        err=${err}
        placeholder="order.*, invoice.paid"
      />
      <${Field} id=${`${x}-description`} name="description" label="Description" value=${initial.description} err=${err} />
      <div>
        <label for=${`${x}-scheme`}>Signature scheme</label>
        <select id=${`${x}-scheme`} name="scheme" aria-invalid=${fieldOf(err) === 'scheme'}>
          ${endpoint ? null : html`<option value="">default</option>`}
          ${['acw', 'standard'].map((v) => html`<option value=${v} selected=${initial.scheme === v}>${v}</option>`)}
        </select>
      </div>
      <${Field} id=${`${x}-timeout`} name="timeout" label="Timeout" value=${initial.timeout} err=${err} placeholder="default, e.g. 5s" />
      <${Field}
        id=${`${x}-max_in_flight`}
        name="max_in_flight"
        label="Max in flight"
        type="number"
        value=${initial.max_in_flight}
        err=${err}
        placeholder="default"
      />
      <${Field}
        id=${`${x}-rate_limit`}
        name="rate_limit"
        label="Rate limit"
        value=${initial.rate_limit}
        err=${err}
        placeholder="none, e.g. 20/s"
      />
      <div>
        <label for=${`${x}-propagate_trace`}>Trace context to the receiver</label>
        <select id=${`${x}-propagate_trace`} name="propagate_trace" aria-invalid=${fieldOf(err) === 'propagate_trace'}>
          ${[
            ['', 'default'],
            ['true', 'sent'],
            ['false', 'not sent'],
          ].map(([v, text]) => html`<option value=${v} selected=${(initial.propagate_trace ?? '') === v}>${text}</option>`)}
        </select>
      </div>
      ${
        endpoint
          ? html`<div class="check">
              <input id="e-enabled" name="enabled" type="checkbox" defaultChecked=${endpoint.enabled} />
              <label for="e-enabled">Enabled</label>
            </div>`
          : null
      }
      <${FormError} err=${err} fields=${FIELDS} />
      <div class="buttons">
        <button type="submit" class="primary" disabled=${busy}>${endpoint ? 'Save' : 'Create'}</button>
        <button type="button" onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  </section>`;
}
