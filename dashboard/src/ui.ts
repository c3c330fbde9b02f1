import { html } from 'htm/preact';
import type { ComponentChildren, VNode } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiFail, type Page } from './api.js';

// Shared pieces: times, errors, tables and cursor paging.

const nowListeners = new Set<(n: number) => void>();
setInterval(() => {
  const n = Date.now();
  for (const f of nowListeners) f(n);
}, 15_000);

/** The current time, refreshed every 15 s, so relative times move on their own. */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    nowListeners.add(setNow);
    return () => void nowListeners.delete(setNow);
  }, []);
  return now;
}

const pad = (n: number): string => String(n).padStart(2, '0');

export function absolute(iso: string): string {
  const d = new Date(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(seconds: number): string {
  const s = Math.round(Math.abs(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

export function relative(iso: string, now: number): string {
  const secs = (new Date(iso).getTime() - now) / 1000;
  if (Math.abs(secs) < 5) return 'just now';
  return secs < 0 ? `${duration(secs)} ago` : `in ${duration(secs)}`;
}

/** An absolute time with the relative one beside it (local time; the ISO instant in the tooltip). */
export function Time({ iso }: { iso: string | null | undefined }): VNode {
  const now = useNow();
  if (!iso) return html`<span class="muted">—</span>`;
  return html`<time datetime=${iso} title=${iso}
    ><span class="abs">${absolute(iso)}</span> <span class="rel">(${relative(iso, now)})</span></time
  >`;
}

export function ErrorNote({ error }: { error: unknown }): VNode | null {
  if (!error) return null;
  const msg = error instanceof Error ? error.message : String(error);
  return html`<p class="error" role="alert">${msg}</p>`;
}

export function Status({ status }: { status: string }): VNode {
  return html`<span class=${`badge s-${status}`}>${status.replace('_', '-')}</span>`;
}

/**
 * A table that scrolls sideways on a narrow screen (focusable, so the keyboard can scroll it too);
 * `stack`: on a narrow screen each row is a card instead, its cells labelled by their `data-label`.
 */
export function Table({
  label,
  head,
  children,
  stack = false,
}: {
  label: string;
  head: string[];
  children: ComponentChildren;
  stack?: boolean;
}): VNode {
  return html`<div class=${stack ? 'table-wrap stack' : 'table-wrap'} tabindex="0" role="region" aria-label=${label}>
    <table>
      <caption class="sr-only">
        ${label}
      </caption>
      <thead>
        <tr>
          ${head.map((h) => html`<th scope="col">${h}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${children}
      </tbody>
    </table>
  </div>`;
}

export interface Paged<T> {
  items: T[];
  next: string | null;
  loading: boolean;
  /** A first page has arrived (until then an empty list means "not yet", not "none"). */
  loaded: boolean;
  error: unknown;
  more(): void;
  reload(): void;
}

/** A list read a page at a time with the API's cursor; `more` appends the next page. */
export function usePaged<T>(path: string | null, key: string = path ?? ''): Paged<T> {
  const [items, setItems] = useState<T[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState(false);
  const [gen, setGen] = useState(0);

  const fetchPage = useCallback(
    async (cursor: string | null, append: boolean) => {
      if (path === null) return;
      setLoading(true);
      try {
        const sep = path.includes('?') ? '&' : '?';
        const page = await api<Page<T>>('GET', cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
        setItems((prev) => (append ? [...prev, ...page.items] : page.items));
        setNext(page.next_cursor);
        setError(null);
        setLoaded(true);
      } catch (err) {
        if (!append) setItems([]);
        setError(err);
      } finally {
        setLoading(false);
      }
    },
    [key],
  );

  useEffect(() => {
    void fetchPage(null, false);
  }, [key, gen]);

  return {
    items,
    next,
    loading,
    loaded,
    error,
    more: () => void fetchPage(next, true),
    reload: () => setGen((g) => g + 1),
  };
}

export function MoreButton({ paged, what }: { paged: Paged<unknown>; what: string }): VNode | null {
  if (!paged.next) return null;
  return html`<p><button type="button" onClick=${paged.more} disabled=${paged.loading}>Load more ${what}</button></p>`;
}

/** Run an action, reporting success or the API's refusal in a live region. */
export function useAction(): [(what: () => Promise<string>) => Promise<void>, VNode | null, boolean] {
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (what: () => Promise<string>): Promise<void> => {
    setBusy(true);
    try {
      setMsg({ ok: true, text: await what() });
    } catch (err) {
      setMsg({ ok: false, text: err instanceof ApiFail || err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  };
  const note = msg ? html`<p class=${msg.ok ? 'ok' : 'error'} role=${msg.ok ? 'status' : 'alert'}>${msg.text}</p>` : null;
  return [run, note, busy];
}

export function navigate(hash: string): void {
  location.hash = hash;
}
