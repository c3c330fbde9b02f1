// An endpoint's run-time actions that open a panel: the secret shown once, rotating it, replaying
// a window (docs/operations.md#rotating-a-secret, #replaying-an-endpoint).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { api, type Endpoint, type ReplayAnswer } from '../api.js';
import { Field, fieldOf, FormError } from './form-parts.js';

/** A secret the API answers once: shown here, kept in this page's memory only, gone when dismissed. */
export function SecretBox({ name, secret, note, onDismiss }: { name: string; secret: string; note: string; onDismiss: () => void }): VNode {
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

export function RotateForm({
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
export function ReplayForm({
  endpoint,
  onDone,
  onCancel,
}: {
  endpoint: Endpoint;
  onDone: (text: string) => void;
  onCancel: () => void;
}): VNode {
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
      <${Field} id="rep-since" name="since" label="Since" class="when" err=${err} placeholder="e.g. 2h or 2026-01-31T00:00:00Z" required />
      <${Field} id="rep-until" name="until" label="Until" class="when" err=${err} placeholder="now" />
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
