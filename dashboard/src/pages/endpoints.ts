import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type Endpoint } from '../api.js';
import { absolute, ErrorNote, Table, Time, useAction } from '../ui.js';
import { ReplayForm, RotateForm, SecretBox } from './endpoint-actions.js';
import { EndpointForm } from './endpoint-form.js';
import { AttentionBox, byHealth, HealthCell } from './endpoint-health.js';
import { BlockedKeys } from './blocked-keys.js';

/** What a row's run-time action opens above the table (one at a time). */
type Panel = { kind: 'edit' | 'rotate' | 'replay'; endpoint: Endpoint };

const pct = (x: number | null): string => (x === null ? '—' : `${(100 * x).toFixed(1)}%`);
const ms = (x: number | null): string => (x === null ? '—' : `${Math.round(x)} ms`);

export function EndpointsTable({
  items,
  admin,
  onChange,
  onPanel,
}: {
  items: Endpoint[];
  admin: boolean;
  onChange: () => void;
  onPanel?: (p: Panel) => void;
}): VNode {
  const [run, note, busy] = useAction();
  const act = (e: Endpoint, what: 'pause' | 'resume' | 'test'): void => {
    void run(async () => {
      await api('POST', `v1/endpoints/${encodeURIComponent(e.name)}/${what}`);
      onChange();
      return what === 'test' ? `A webhook.test event is on its way to ${e.name}.` : `${e.name} ${what === 'pause' ? 'paused' : 'resumed'}.`;
    });
  };
  const head = ['Endpoint', 'Health', 'Success', 'p50 / p99', 'In flight / held', 'Last error', 'Topics'];
  return html`${note}
    <${Table} label="Endpoints" head=${admin ? [...head, 'Actions'] : head} stack>
      ${items.map(
        (e) =>
          html`<tr>
            <th scope="row">
              <span class="name">${e.name}</span>
              <div class="muted small">${e.url}</div>
              <div class="muted small">${e.source === 'api' ? 'created through the API' : 'from the config file'}</div>
              ${e.rotate_until ? html`<div class="small">secret rotating until <${Time} iso=${e.rotate_until} /></div>` : null}
            </th>
            <td data-label="Health"><${HealthCell} e=${e} /></td>
            <td data-label="Success">
              ${pct(e.success_rate)}
              <div class="muted small">${e.attempts} in ${e.window_minutes} min</div>
            </td>
            <td data-label="p50 / p99">${ms(e.p50_duration_ms)} / ${ms(e.p99_duration_ms)}</td>
            <td data-label="In flight / held">${e.in_flight ?? '—'} / ${e.held_jobs}</td>
            <td class="err" data-label="Last error">
              ${
                (e.last_error ?? e.circuit.last_error)
                  ? html`${e.last_error ?? e.circuit.last_error}
                      <div class="small"><${Time} iso=${e.last_error ? e.last_error_at : e.circuit.last_error_at} /></div>`
                  : html`<span class="muted">none</span>`
              }
            </td>
            <td data-label="Topics">
              ${e.topics.length ? e.topics.map((t) => html`<code class="topic">${t}</code> `) : html`<span class="muted">none</span>`}
            </td>
            ${
              admin
                ? html`<td class="actions" data-label="Actions">
                    ${
                      e.paused
                        ? html`<button type="button" disabled=${busy} onClick=${() => act(e, 'resume')} aria-label=${`Resume ${e.name}`}>
                            Resume
                          </button>`
                        : html`<button type="button" disabled=${busy} onClick=${() => act(e, 'pause')} aria-label=${`Pause ${e.name}`}>
                            Pause
                          </button>`
                    }
                    <button
                      type="button"
                      disabled=${busy || e.paused}
                      onClick=${() => act(e, 'test')}
                      aria-label=${`Send a test event to ${e.name}`}
                    >
                      Test
                    </button>
                    ${
                      onPanel && e.source === 'api'
                        ? html`<div class="row-more">
                            ${(['edit', 'rotate', 'replay'] as const).map(
                              (kind) =>
                                html`<button
                                  type="button"
                                  onClick=${() => onPanel({ kind, endpoint: e })}
                                  aria-label=${`${LABEL[kind]} ${e.name}`}
                                >
                                  ${LABEL[kind]}
                                </button>`,
                            )}
                          </div>`
                        : null
                    }
                  </td>`
                : null
            }
          </tr>`,
      )}
    <//>`;
}

const LABEL = { edit: 'Edit', rotate: 'Rotate secret', replay: 'Replay' } as const;

export function EndpointsPage({ admin }: { admin: boolean }): VNode {
  const [items, setItems] = useState<Endpoint[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = (): void => {
    api<{ items: Endpoint[] }>('GET', 'v1/endpoints')
      .then((r) => {
        setItems(byHealth(r.items));
        setError(null);
      })
      .catch(setError);
  };
  useEffect(() => {
    load();
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, []);
  const [panel, setPanel] = useState<Panel | { kind: 'create' } | null>(null);
  const [secret, setSecret] = useState<{ name: string; secret: string; note: string } | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const done = (text: string): void => {
    setPanel(null);
    load();
    setMessage(text);
  };
  const open = (p: Panel | { kind: 'create' }): void => {
    setPanel(p);
    setSecret(null);
    setMessage(null);
  };
  const cancel = (): void => setPanel(null);
  const form = (): VNode | null => {
    if (!panel) return null;
    if (panel.kind === 'create')
      return html`<${EndpointForm}
        onCancel=${cancel}
        onSaved=${(e: Endpoint & { secret?: string }) => {
          setSecret({ name: e.name, secret: e.secret ?? '', note: 'Receivers check signatures with it.' });
          done(`${e.name} created.`);
        }}
      />`;
    const e = panel.endpoint;
    if (panel.kind === 'edit')
      return html`<${EndpointForm} key=${e.name} endpoint=${e} onCancel=${cancel} onSaved=${() => done(`${e.name} saved.`)} />`;
    if (panel.kind === 'rotate')
      return html`<${RotateForm}
        key=${e.name}
        endpoint=${e}
        onCancel=${cancel}
        onSecret=${(s: string, until: string) => {
          setSecret({ name: e.name, secret: s, note: `Both secrets sign deliveries until ${absolute(until)}.` });
          done(`A new secret for ${e.name}.`);
        }}
      />`;
    return html`<${ReplayForm} key=${e.name} endpoint=${e} onCancel=${cancel} onDone=${done} />`;
  };
  return html`<h1>Endpoints</h1>
    <p class="muted">
      Endpoints come from the config file (<code>notify.webhook.endpoints</code>) or are created through the API (<code
        >POST /v1/endpoints</code
      >, <code>acw-webhooks endpoints add</code>). Success rate and durations cover the last window shown.
    </p>
    ${admin && !panel ? html`<div class="actions-bar"><button type="button" class="primary" onClick=${() => open({ kind: 'create' })}>Create endpoint</button></div>` : null}
    ${secret ? html`<${SecretBox} ...${secret} onDismiss=${() => setSecret(null)} />` : null} ${form()}
    ${message ? html`<p class="ok" role="status">${message}</p>` : null}
    <${ErrorNote} error=${error} />
    ${items ? html`<${AttentionBox} items=${items} id="attention-h" />` : null}
    ${
      items
        ? html`<${EndpointsTable} items=${items} admin=${admin} onChange=${load} onPanel=${admin ? open : undefined} />`
        : error
          ? null
          : html`<p role="status">Loading…</p>`
    }
    <${BlockedKeys} admin=${admin} />`;
}
