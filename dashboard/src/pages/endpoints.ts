import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiFail, type Endpoint, type ReplayAnswer } from '../api.js';
import { absolute, ErrorNote, Status, Table, Time, useAction } from '../ui.js';

/** What a row's run-time action opens above the table (one at a time). */
type Panel = { kind: 'edit' | 'rotate' | 'replay'; endpoint: Endpoint };

const RANK: Record<string, number> = { open: 0, half_open: 1, closed: 2 };

/** Endpoints that are not delivering first: open circuits, then half-open, then paused, then by name. */
export function byCircuit(items: Endpoint[]): Endpoint[] {
  return items.toSorted(
    (a, b) =>
      (RANK[a.circuit.state] ?? 0) - (RANK[b.circuit.state] ?? 0) || Number(b.paused) - Number(a.paused) || a.name.localeCompare(b.name),
  );
}

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
  const head = ['Endpoint', 'Circuit', 'Success', 'p50 / p99', 'In flight', 'Held', 'Last error', 'Topics'];
  return html`${note}
    <${Table} label="Endpoints" head=${admin ? [...head, 'Actions'] : head}>
      ${items.map(
        (e) =>
          html`<tr>
            <th scope="row">
              <span class="name">${e.name}</span>
              <div class="muted small">${e.url}</div>
              <div class="muted small">${e.source === 'api' ? 'created through the API' : 'from the config file'}</div>
              ${e.rotate_until ? html`<div class="small">secret rotating until <${Time} iso=${e.rotate_until} /></div>` : null}
            </th>
            <td>
              <${Status} status=${e.paused ? 'paused' : e.circuit.state} />
              ${e.paused && e.paused_by ? html`<div class="muted small">by ${e.paused_by}</div>` : null}
              ${
                !e.paused && e.circuit.state !== 'closed' && e.circuit.next_probe_at
                  ? html`<div class="small">next probe <${Time} iso=${e.circuit.next_probe_at} /></div>`
                  : null
              }
            </td>
            <td>
              ${pct(e.success_rate)}
              <div class="muted small">${e.attempts} in ${e.window_minutes} min</div>
            </td>
            <td>${ms(e.p50_duration_ms)} / ${ms(e.p99_duration_ms)}</td>
            <td>${e.in_flight ?? '—'}</td>
            <td>${e.held_jobs}</td>
            <td class="err">
              ${
                e.last_error
                  ? html`${e.last_error}
                      <div class="small"><${Time} iso=${e.last_error_at} /></div>`
                  : html`<span class="muted">none</span>`
              }
            </td>
            <td>
              ${e.topics.length ? e.topics.map((t) => html`<code class="topic">${t}</code> `) : html`<span class="muted">none</span>`}
            </td>
            ${
              admin
                ? html`<td class="actions">
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

/** The API's 400 names a field (`topics[0]`, `url`); its first segment is the form field it belongs to. */
const fieldOf = (err: unknown): string | undefined => (err instanceof ApiFail && err.field ? err.field.split(/[.[]/)[0] : undefined);

function Field(p: {
  id: string;
  name: string;
  label: string;
  value?: string | undefined;
  err: unknown;
  type?: string;
  placeholder?: string;
  required?: boolean;
}): VNode {
  const bad = fieldOf(p.err) === p.name;
  return html`<div>
    <label for=${p.id}>${p.label}</label>
    <input
      id=${p.id}
      name=${p.name}
      type=${p.type ?? 'text'}
      defaultValue=${p.value ?? ''}
      placeholder=${p.placeholder}
      required=${p.required}
      aria-invalid=${bad}
      aria-describedby=${bad ? `${p.id}-err` : undefined}
    />
    ${bad ? html`<p class="field-error" id=${`${p.id}-err`}>${(p.err as Error).message}</p>` : null}
  </div>`;
}

/** An error the form's fields do not show beside themselves. */
function FormError({ err, fields }: { err: unknown; fields: string[] }): VNode | null {
  const f = fieldOf(err);
  return f && fields.includes(f) ? null : html`<${ErrorNote} error=${err} />`;
}

/** A rate limit per second as the API takes it back: "20/s", or per minute when that is a whole number. */
const rateText = (r: number | null): string => (r === null ? '' : Number.isInteger(r) ? `${r}/s` : `${Math.round(r * 60)}/min`);

const FIELDS = ['name', 'url', 'topics', 'description', 'scheme', 'timeout', 'max_in_flight', 'rate_limit', 'enabled'];

/** Create (no endpoint) or edit an endpoint; an edit sends only the fields changed. */
function EndpointForm({
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
      if (endpoint ? v === initial[k] : v === '') continue;
      if (k === 'topics')
        body[k] = v
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean);
      else if (k === 'max_in_flight') body[k] = v === '' ? undefined : Number(v);
      else if (k === 'enabled') body[k] = v === 'true';
      else if (k === 'rate_limit') body[k] = v === '' ? null : v;
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

/** A secret the API answers once: shown here, kept in this page's memory only, gone when dismissed. */
function SecretBox({ name, secret, note, onDismiss }: { name: string; secret: string; note: string; onDismiss: () => void }): VNode {
  const [copied, setCopied] = useState('');
  const copy = (): void => {
    navigator.clipboard
      ?.writeText(secret)
      .then(() => setCopied('Copied.'))
      .catch(() => setCopied('Copying is not allowed here: select the text instead.'));
  };
  return html`<section aria-labelledby="secret-h" class="secret-box">
    <h2 id="secret-h">Secret of ${name}</h2>
    <p><strong>Copy it now: it will not be shown again.</strong> ${note}</p>
    <code class="secret" tabindex="0" aria-label=${`Secret of ${name}`}>${secret}</code>
    <div class="buttons">
      <button type="button" class="primary" onClick=${copy}>Copy secret</button>
      <button type="button" onClick=${onDismiss}>I have saved it, hide it</button>
      <span role="status">${copied}</span>
    </div>
  </section>`;
}

function RotateForm({
  endpoint,
  onSecret,
  onCancel,
}: {
  endpoint: Endpoint;
  onSecret: (s: string, until: string) => void;
  onCancel: () => void;
}): VNode {
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: Event): Promise<void> => {
    ev.preventDefault();
    const overlap = String(new FormData(ev.target as HTMLFormElement).get('overlap') ?? '').trim();
    setBusy(true);
    try {
      const r = await api<{ secret_next: string; rotate_until: string }>(
        'POST',
        `v1/endpoints/${encodeURIComponent(endpoint.name)}/rotate-secret`,
        overlap ? { overlap } : {},
      );
      onSecret(r.secret_next, r.rotate_until);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<section aria-labelledby="rot-h" class="box">
    <h2 id="rot-h">Rotate the secret of ${endpoint.name}</h2>
    <p class="muted">A new secret is made; both sign every delivery until the overlap ends, so the receiver can switch in that time.</p>
    <form class="filters" onSubmit=${submit}>
      <${Field} id="rot-overlap" name="overlap" label="Overlap" value="24h" err=${err} />
      <${FormError} err=${err} fields=${['overlap']} />
      <div class="buttons">
        <button type="submit" class="primary" disabled=${busy}>Rotate</button>
        <button type="button" onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  </section>`;
}

/** Replay a window: a dry run first, its counts shown, and nothing queued until the user confirms. */
function ReplayForm({ endpoint, onDone, onCancel }: { endpoint: Endpoint; onDone: (text: string) => void; onCancel: () => void }): VNode {
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [pending, setPending] = useState<{ body: Record<string, string>; r: ReplayAnswer } | null>(null);
  const path = `v1/endpoints/${encodeURIComponent(endpoint.name)}/replay`;
  const check = async (ev: Event): Promise<void> => {
    ev.preventDefault();
    const f = new FormData(ev.target as HTMLFormElement);
    const body: Record<string, string> = {};
    for (const k of ['since', 'until', 'status']) {
      const v = String(f.get(k) ?? '').trim();
      if (v) body[k] = v;
    }
    setBusy(true);
    try {
      setPending({ body, r: await api<ReplayAnswer>('POST', path, { ...body, dry_run: true }) });
      setErr(null);
    } catch (e) {
      setPending(null);
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  const confirm = async (): Promise<void> => {
    if (!pending) return;
    setBusy(true);
    try {
      const r = await api<ReplayAnswer>('POST', path, pending.body);
      onDone(
        `${r.reset + r.created} job${r.reset + r.created === 1 ? '' : 's'} of ${endpoint.name} queued again (${r.reset} reset, ${r.created} new).`,
      );
    } catch (e) {
      setPending(null);
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  const n = pending ? pending.r.reset + pending.r.created : 0;
  const left = pending ? Object.entries(pending.r.unchanged).filter(([, c]) => c > 0) : [];
  return html`<section aria-labelledby="rep-h" class="box">
    <h2 id="rep-h">Replay ${endpoint.name}</h2>
    <p class="muted">
      Queues again, with the same ids, this endpoint's jobs made in the window: the dead ones, or all of them (completed too); an event of
      the window that has no job for it gets one.
    </p>
    <form class="filters" onSubmit=${check}>
      <${Field} id="rep-since" name="since" label="Since" err=${err} placeholder="e.g. 2h or 2026-01-31T00:00:00Z" required />
      <${Field} id="rep-until" name="until" label="Until" err=${err} placeholder="now" />
      <div>
        <label for="rep-status">Jobs</label>
        <select id="rep-status" name="status" aria-invalid=${fieldOf(err) === 'status'}>
          <option value="dead">dead only</option>
          <option value="all">all</option>
        </select>
      </div>
      <${FormError} err=${err} fields=${['since', 'until', 'status']} />
      <div class="buttons">
        <button type="submit" disabled=${busy}>Count (dry run)</button>
        <button type="button" onClick=${onCancel}>Cancel</button>
      </div>
    </form>
    ${
      pending
        ? html`<div class="confirm" role="alertdialog" aria-labelledby="rep-confirm">
            <p id="rep-confirm">
              <strong>${n}</strong> job${n === 1 ? '' : 's'} would be queued again: ${pending.r.reset} reset, ${pending.r.created} made for
              events that had none. ${left.length ? ` Left as they are: ${left.map(([s, c]) => `${c} ${s}`).join(', ')}.` : ''}
              ${pending.r.retention_limited ? ` The window was cut at ${pending.r.window.since}: older jobs may have been purged.` : ''}
            </p>
            ${n > 0 ? html`<button type="button" class="primary" disabled=${busy} onClick=${confirm}>Replay ${n}</button>` : null}
            <button type="button" onClick=${() => setPending(null)}>Cancel</button>
          </div>`
        : null
    }
  </section>`;
}

export function EndpointsPage({ admin }: { admin: boolean }): VNode {
  const [items, setItems] = useState<Endpoint[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = (): void => {
    api<{ items: Endpoint[] }>('GET', 'v1/endpoints')
      .then((r) => {
        setItems(byCircuit(r.items));
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
    ${
      items
        ? html`<${EndpointsTable} items=${items} admin=${admin} onChange=${load} onPanel=${admin ? open : undefined} />`
        : error
          ? null
          : html`<p role="status">Loading…</p>`
    }`;
}
