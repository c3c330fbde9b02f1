// A minimal Server-Sent Events reader over fetch for the alert stream tests.

export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
  at: number;
}

export interface SseStream {
  status: number;
  contentType: string | null;
  events: SseEvent[];
  /** Raw text received so far (comments included). */
  text: () => string;
  /** Resolves once `n` events have arrived. */
  waitForEvents(n: number, timeoutMs?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers, signal: ctl.signal });
  const events: SseEvent[] = [];
  let raw = '';
  let buf = '';
  const waiters = new Set<() => void>();
  const decoder = new TextDecoder();
  const ended = (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        const chunk = decoder.decode(value, { stream: true });
        raw += chunk;
        buf += chunk;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev: SseEvent = { data: '', at: Date.now() };
          let hasData = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const [k, ...rest] = line.split(':');
            const v = rest.join(':').replace(/^ /, '');
            if (k === 'id') ev.id = v;
            else if (k === 'event') ev.event = v;
            else if (k === 'data') {
              ev.data += v;
              hasData = true;
            }
          }
          if (hasData) events.push(ev);
          for (const w of waiters) w();
        }
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    events,
    text: () => raw,
    ended,
    close: () => ctl.abort(),
    waitForEvents: (n, timeoutMs = 5_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (events.length < n) return;
          waiters.delete(check);
          clearTimeout(t);
          resolve(events.slice(0, n));
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`got ${events.length} of ${n} SSE events within ${timeoutMs} ms; raw: ${raw.slice(-500)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
}

/** Resolves once the raw text contains `needle` (e.g. the ": connected" comment). */
export async function waitForText(s: SseStream, needle: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!s.text().includes(needle)) {
    if (Date.now() > deadline) throw new Error(`no ${JSON.stringify(needle)} in SSE stream: ${s.text().slice(-300)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
