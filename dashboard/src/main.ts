import { html, render } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiFail, onUnauthorized, type Me, type Page, type Notification } from './api.js';
import { AlertsPage } from './pages/alerts.js';
import { DeadPage } from './pages/dead.js';
import { EndpointsPage } from './pages/endpoints.js';
import { TopicsPage } from './pages/topics.js';
import { JobPage, JobsPage } from './pages/jobs.js';
import { OverviewPage } from './pages/overview.js';

/** `#/jobs/ID?x=y` as a page, its id and its query; the hash keeps the page across a sign-in. */
export interface Route {
  page: string;
  id?: string;
  query: URLSearchParams;
}

function parseHash(): Route {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path = '', query = ''] = raw.split('?', 2);
  const parts = path.split('/').filter(Boolean);
  const route: Route = { page: parts[0] ?? '', query: new URLSearchParams(query) };
  if (parts[1]) route.id = decodeURIComponent(parts[1]);
  return route;
}

const NAV: Array<[string, string]> = [
  ['', 'Overview'],
  ['jobs', 'Jobs'],
  ['dead', 'Dead letters'],
  ['endpoints', 'Endpoints'],
  ['topics', 'Topics'],
  ['alerts', 'Alerts'],
];

function SignIn({ onSignedIn, ended }: { onSignedIn: (me: Me) => void; ended: boolean }): VNode {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const token = input.current?.value.trim() ?? '';
    if (!token) {
      setError('Enter your API token.');
      return;
    }
    setBusy(true);
    try {
      const me = await api<Me>('POST', 'v1/session', { token });
      // The token leaves the page: only the HttpOnly session cookie stays.
      if (input.current) input.current.value = '';
      onSignedIn(me);
    } catch (err) {
      setError(
        err instanceof ApiFail && err.status === 401
          ? 'That token is unknown or has been revoked. Check it and try again.'
          : err instanceof Error
            ? err.message
            : String(err),
      );
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1>acw-webhooks</h1>
    <form onSubmit=${submit} aria-describedby="signin-help">
      <h2>Sign in</h2>
      ${ended ? html`<p class="note" role="status">Your session has ended. Sign in again to go back to the page you were on.</p>` : null}
      <label for="token">API token</label>
      <input
        id="token"
        name="token"
        type="password"
        autocomplete="off"
        spellcheck="false"
        required
        ref=${input}
        aria-invalid=${error ? 'true' : 'false'}
        aria-describedby=${error ? 'signin-error' : undefined}
      />
      ${error ? html`<p id="signin-error" class="error" role="alert">${error}</p>` : null}
      <p id="signin-help" class="muted">
        An admin or viewer token (<code>acw-webhooks users add NAME --role viewer</code>). It is exchanged for a session cookie and not kept
        in the browser.
      </p>
      <button type="submit" class="primary" disabled=${busy}>Sign in</button>
    </form>
  </main>`;
}

function Shell({ me, route, onSignOut }: { me: Me; route: Route; onSignOut: () => void }): VNode {
  const [unread, setUnread] = useState<number | null>(null);
  const refreshUnread = (): void => {
    api<Page<Notification>>('GET', 'v1/notifications?unread_only=true&limit=500')
      .then((p) => setUnread(p.items.length))
      .catch(() => undefined);
  };
  useEffect(() => {
    refreshUnread();
    const t = setInterval(refreshUnread, 30_000);
    return () => clearInterval(t);
  }, []);
  const admin = me.user.role === 'admin';
  let page: VNode;
  switch (route.page) {
    case 'jobs':
      page = route.id ? html`<${JobPage} id=${route.id} admin=${admin} />` : html`<${JobsPage} query=${route.query} />`;
      break;
    case 'dead':
      page = html`<${DeadPage} admin=${admin} />`;
      break;
    case 'endpoints':
      page = html`<${EndpointsPage} admin=${admin} />`;
      break;
    case 'topics':
      page = html`<${TopicsPage} admin=${admin} />`;
      break;
    case 'alerts':
      page = html`<${AlertsPage} onRead=${refreshUnread} admin=${admin} query=${route.query} />`;
      break;
    default:
      page = html`<${OverviewPage} admin=${admin} />`;
  }
  return html`<a
      class="skip"
      href="#main"
      onClick=${(e: Event) => {
        e.preventDefault();
        document.getElementById('main')?.focus();
      }}
      >Skip to content</a
    >
    <header class="top">
      <span class="brand">acw-webhooks</span>
      <nav aria-label="Pages">
        <ul>
          ${NAV.map(
            ([p, label]) =>
              html`<li>
                <a href=${`#/${p}`} aria-current=${route.page === p ? 'page' : undefined}
                  >${label}${
                    p === 'alerts' && unread
                      ? html` <span class="count" aria-label=${`${unread >= 500 ? '500+' : unread} unread`}
                          >${unread >= 500 ? '500+' : unread}</span
                        >`
                      : null
                  }</a
                >
              </li>`,
          )}
        </ul>
      </nav>
      <div class="who">
        <span>${me.user.name} <span class="badge role">${me.user.role}</span></span>
        <button type="button" onClick=${onSignOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1">${page}</main>`;
}

function App(): VNode {
  // undefined: still asking who is signed in.
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = (): void => setRoute(parseHash());
    addEventListener('hashchange', on);
    onUnauthorized(() => {
      setEnded(true);
      setMe(null);
    });
    api<Me>('GET', 'v1/session')
      .then(setMe)
      .catch(() => setMe(null));
    return () => removeEventListener('hashchange', on);
  }, []);
  useEffect(() => {
    const title = NAV.find(([p]) => p === route.page)?.[1] ?? 'Overview';
    document.title = me ? `${route.id ? 'Job' : title} · acw-webhooks` : 'Sign in · acw-webhooks';
  }, [route, me]);
  if (me === undefined) return html`<main id="main" class="signin"><p role="status">Loading…</p></main>`;
  if (me === null)
    return html`<${SignIn}
      ended=${ended}
      onSignedIn=${(m: Me) => {
        setEnded(false);
        setMe(m);
      }}
    />`;
  const signOut = (): void => {
    api('DELETE', 'v1/session')
      .catch(() => undefined)
      .finally(() => {
        setEnded(false);
        setMe(null);
      });
  };
  return html`<${Shell} me=${me} route=${route} onSignOut=${signOut} />`;
}

render(html`<${App} />`, document.getElementById('app')!);
