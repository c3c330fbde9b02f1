// The pieces the endpoint forms share: a labelled input that shows the API's refusal of its own
// field beside it, and the refusal no field shows.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { ApiFail } from '../api.js';
import { ErrorNote } from '../ui.js';

/** The API's 400 names a field (`topics[0]`, `url`); its first segment is the form field it belongs to. */
export const fieldOf = (err: unknown): string | undefined => (err instanceof ApiFail && err.field ? err.field.split(/[.[]/)[0] : undefined);

export function Field(p: {
  id: string;
  name: string;
  label: string;
  value?: string | undefined;
  err: unknown;
  type?: string;
  placeholder?: string;
  required?: boolean;
  /** `when`: a time or a duration, wide enough for an RFC 3339 instant. */
  class?: string;
}): VNode {
  const bad = fieldOf(p.err) === p.name;
  return html`<div>
    <label for=${p.id}>${p.label}</label>
    <input
      id=${p.id}
      name=${p.name}
      type=${p.type ?? 'text'}
      class=${p.class}
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
export function FormError({ err, fields }: { err: unknown; fields: string[] }): VNode | null {
  const f = fieldOf(err);
  return f && fields.includes(f) ? null : html`<${ErrorNote} error=${err} />`;
}
