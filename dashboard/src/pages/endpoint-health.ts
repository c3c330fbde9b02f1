// An endpoint's health as the API words it (docs/operations.md#the-endpoints-view): the badge in
// the tables, and the banner above them naming what is wrong, the last error and the next probe.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { Endpoint } from '../api.js';
import { Time } from '../ui.js';

/** The most pressing first: down, failing, paused, disabled, then healthy; by name within each. */
const RANK: Record<Endpoint['health'], number> = { down: 0, failing: 1, paused: 2, disabled: 3, healthy: 4 };

export function byHealth(items: Endpoint[]): Endpoint[] {
  return items.toSorted((a, b) => RANK[a.health] - RANK[b.health] || a.name.localeCompare(b.name));
}

/** The health word, and under it what the word leaves out: the circuit's state and next probe, who paused it. */
export function HealthCell({ e }: { e: Endpoint }): VNode {
  const circuit = e.circuit.state.replace('_', '-');
  return html`<span class=${`badge h-${e.health}`}>${e.health}</span>
    ${e.circuit.state !== 'closed' ? html`<div class="small">circuit ${circuit}</div>` : null}
    ${e.paused && e.paused_by ? html`<div class="muted small">by ${e.paused_by}</div>` : null}
    ${e.circuit.state !== 'closed' && e.circuit.next_probe_at ? html`<div class="small">next probe <${NextProbe} iso=${e.circuit.next_probe_at} /></div>` : null}`;
}

/** A probe time in the past means "as soon as a job falls due", which is what it says then. */
function NextProbe({ iso }: { iso: string }): VNode {
  return new Date(iso).getTime() <= Date.now() ? html`<span>when a job is due</span>` : html`<${Time} iso=${iso} />`;
}

function lastError(e: Endpoint): { text: string; at: string | null } | null {
  if (e.last_error) return { text: e.last_error, at: e.last_error_at };
  if (e.circuit.last_error) return { text: e.circuit.last_error, at: e.circuit.last_error_at };
  return null;
}

/** One line per endpoint that is not delivering, or whose deliveries are refused, with what to do about it. */
function Line({ e }: { e: Endpoint }): VNode {
  const err = lastError(e);
  // Phrases joined here, not across template lines: htm drops whitespace that holds a line break.
  const held = `${e.held_jobs} held job${e.held_jobs === 1 ? '' : 's'}`;
  let what: VNode;
  if (e.health === 'down') {
    const since = html` since <${Time} iso=${e.circuit.opened_at ?? e.circuit.since} />`;
    const probe = e.circuit.next_probe_at ? html`, next probe <${NextProbe} iso=${e.circuit.next_probe_at} />` : null;
    what = html`${`down: circuit ${e.circuit.state.replace('_', '-')}`}${since}${`, ${held}`}${probe}`;
  } else if (e.health === 'failing') {
    const codes = `failing: its receiver refuses deliveries (${e.failing?.status_codes.join(', ') || '4xx'})`;
    what = html`${codes}${e.failing?.since ? html` since <${Time} iso=${e.failing.since} />` : null}`;
  } else if (e.health === 'paused') what = html`${`paused${e.paused_by ? ` by ${e.paused_by}` : ''}, ${held}`}`;
  else what = html`${`disabled in the config file, ${held}`}`;
  return html`<li data-endpoint=${e.name}>
    <a href="#/endpoints"><strong>${e.name}</strong></a> ${what}
    ${err ? html`<div class="small err">last error: ${err.text}${err.at ? html` (<${Time} iso=${err.at} />)` : null}</div>` : null}
  </li>`;
}

/** The banner of endpoints that need attention; nothing when every one is healthy. */
export function AttentionBox({ items, id }: { items: Endpoint[]; id: string }): VNode | null {
  const bad = items.filter((e) => e.health !== 'healthy');
  if (bad.length === 0) return null;
  const alarm = bad.some((e) => e.health === 'down' || e.health === 'failing');
  return html`<section aria-labelledby=${id} class=${alarm ? 'warn-box alarm' : 'warn-box'}>
    <h2 id=${id}>Endpoints that need attention</h2>
    <ul>
      ${bad.map((e) => html`<${Line} e=${e} />`)}
    </ul>
    ${
      alarm
        ? html`<p class="small">
            A down endpoint is probed on its own and delivers again once a probe succeeds; <em>Test</em> probes it now. A failing one is up
            but refuses what it gets: fix the receiver (or the secret it checks), then send a test.
          </p>`
        : null
    }
  </section>`;
}
