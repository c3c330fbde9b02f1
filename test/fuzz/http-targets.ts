// What the HTTP fuzz (http.test.ts) sends, per route: every value tagged valid, or with the rule it
// breaks (src/http/schemas.ts, src/notify/input.ts, src/endpoints/input.ts and the checks behind
// them), or as not decided (random JSON, values that depend on the machine or on rows written by
// earlier cases).
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { ALERT_ACTIONS } from '../../src/admin/alerts.js';
import { JOB_STATUSES } from '../../src/admin/job-view.js';
import { jsonTok } from './arbitraries.js';
import {
  ANY,
  GOOD,
  arrayTok,
  bodyCase,
  breaks,
  field,
  join,
  objectTok,
  queryCase,
  rawField,
  segment,
  type BodyCase,
  type Tagged,
  type Verdict,
} from './tagged.js';

export interface Req {
  method: string;
  path: string;
  body: BodyCase;
  token: 'admin' | 'service';
  /** The path's, the query's and the body's verdicts together. */
  verdict: Verdict;
}

/** Job ids the fixtures made, by status; a case names a status and is sent to that job. */
export interface Fixtures {
  jobIds: Record<'dead' | 'pending' | 'completed', string>;
}

const ENDPOINT_NAMES = ['cfg', 'stored-a', 'fz-a', 'fz-b', 'nope'];
/** Names the create target makes, fresh for most of its cases: a guard broken there lets one through. */
const FRESH = Array.from({ length: 300 }, (_, i) => `fz-${i}`);
const name = () => segment({ good: ENDPOINT_NAMES });
/** The create target's endpoints too, so that many cases find one to change. */
const anyName = () => segment({ good: [...ENDPOINT_NAMES, ...FRESH] });
const noBody = bodyCase(objectTok({}));
const noQuery = queryCase({});
const CURSOR = { good: [], bad: { abc: 'not a cursor this service issued', eyJ9: 'not a cursor this service issued' } };
const CAPITAL = 'a capital letter (topics are lowercase)';
const SINCE = {
  good: ['1h', '2026-01-01T00:00:00Z', '9999999h'],
  bad: { yesterday: 'not a time', '2026-13-45T99:00:00Z': 'no such date' },
};

const notifyObj = objectTok(
  {
    topic: field({ good: ['a.b', 'orders.created', 'x'], bad: { 'A.B': CAPITAL, 'a..b': 'an empty word', '': 'empty' } }),
    data: rawField({
      good: ['{}', '{"a":1}', '[1,"two",null]', 'null', '"text"'],
      bad: { '"\\u0000"': 'a NUL character', '{"a":"\\ud800"}': 'a lone surrogate' },
    }),
    // Only "ops" is a user here.
    recipients: rawField({
      good: ['["ops"]', '[]'],
      bad: { '["a b"]': 'not a user name', '"ops"': 'not a list', '["a","b"]': 'no such user' },
    }),
    idempotency_key: field({ good: ['k1', 'key-2'], bad: { '': 'empty', 'a key': 'a space' } }),
  },
  { required: ['topic', 'data'] },
);

const events = arrayTok(notifyObj, 5, 'no event');

/** The JSON string a field's raw text holds, or undefined (absent, or not a string). */
function str(present: ReadonlyMap<string, string>, key: string): string | undefined {
  const t = present.get(key);
  try {
    const v: unknown = t === undefined ? undefined : JSON.parse(t);
    return typeof v === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

const endpointFields = {
  url: field({
    good: ['http://127.0.0.1:9/x', 'https://127.0.0.1/y'],
    bad: {
      'ftp://127.0.0.1/': 'not http or https',
      'http://u:p@127.0.0.1/': 'user-info',
      'http://10.0.0.1/': 'a private address (SSRF guard)',
      'http://[::1]:9/': 'loopback outside allow_networks (SSRF guard)',
    },
    // Refused when the resolver also answers ::1 (outside allow_networks) for it.
    maybe: ['http://localhost:9/'],
  }),
  topics: rawField({ good: ['["*"]', '["a.*"]', '["a.b","c"]'], bad: { '["A B"]': 'not a topic', '["a.B"]': CAPITAL } }),
  scheme: field({ good: ['acw', 'standard'], bad: { ACW: 'not a scheme (lowercase)' } }),
  headers: rawField({
    good: ['{"X-A":"1"}', '{}'],
    bad: {
      '{"Host":"x"}': 'a header the service sets',
      '{"content-length":"1"}': 'a header the service sets',
      '{"x-acw-signature":"s"}': 'a header the service sets',
      '{"X-A":"a\\nb"}': 'a line break in a value',
    },
  }),
  timeout: field({ good: ['1s', '100ms', '60s'], bad: { '50ms': 'under 100ms', '61s': 'over 60s', '1h': 'over 60s' } }),
  max_in_flight: rawField({ good: ['1', '10'], bad: { '0': 'under 1', '100000': 'over 10000', '1.5': 'not an integer' } }),
  rate_limit: rawField({ good: ['"20/s"', '"600/min"', 'null'], bad: { '"0/s"': 'not over 0', '"none"': 'not a rate (null clears it)' } }),
  enabled: rawField({ good: ['true', 'false'] }),
  description: field({ good: ['what it is for', ''], bad: { '\u0000': 'not printable' } }),
};

const post = (path: fc.Arbitrary<Tagged>, body: fc.Arbitrary<BodyCase>, token: Req['token'] = 'admin', method = 'POST') =>
  fc.tuple(path, body).map(([p, b]): Req => ({ method, path: p.text, body: b, token, verdict: join(p.verdict, b.verdict) }));
const get = (path: fc.Arbitrary<Tagged>, token: Req['token'] = 'admin') =>
  path.map((p): Req => ({
    method: 'GET',
    path: p.text,
    body: { body: undefined, contentType: undefined, verdict: GOOD },
    token,
    verdict: p.verdict,
  }));
/** A path from its parts: literal text, or tagged segments and query strings. */
const path = (...parts: Array<string | fc.Arbitrary<Tagged>>): fc.Arbitrary<Tagged> =>
  fc
    .tuple(...parts.map((p) => (typeof p === 'string' ? fc.constant<Tagged>({ text: p, verdict: GOOD }) : p)))
    .map((ts) => ({ text: ts.map((t) => t.text).join(''), verdict: join(...ts.map((t) => t.verdict)) }));

export function targets(fx: Fixtures): Record<string, fc.Arbitrary<Req>> {
  const jobId = fc.oneof(
    segment({ good: ['00000000-0000-0000-0000-000000000000', randomUUID()], bad: { 'not-a-uuid': 'not a UUID' } }),
    fc.constantFrom('dead', 'pending', 'completed').map((s): Tagged => ({ text: fx.jobIds[s as keyof Fixtures['jobIds']], verdict: GOOD })),
  );
  return {
    'POST /v1/notify': post(path('/v1/notify'), bodyCase(notifyObj), 'service'),
    'POST /v1/notify/batch': post(
      path('/v1/notify/batch'),
      bodyCase(
        objectTok(
          {
            events: {
              ...events,
              any: fc.oneof(
                { weight: 4, arbitrary: events.any },
                jsonTok.map((text) => ({ text, verdict: ANY })),
              ),
            },
          },
          { required: ['events'] },
        ),
      ),
      'service',
    ),
    'GET /v1/jobs': get(
      path(
        '/v1/jobs',
        queryCase({
          status: { good: JOB_STATUSES, bad: { DEAD: 'not a status (lowercase)' } },
          type: { good: ['webhook.deliver'] },
          topic: { good: ['a.b'], bad: { 'A.B': CAPITAL } },
          endpoint: { good: ['cfg', 'stored-a'] },
          event_id: { good: [randomUUID()], bad: { 'not-a-uuid': 'not a UUID' } },
          limit: { good: ['10', '500'], bad: { '501': 'over 500', '0': 'under 1' } },
          cursor: CURSOR,
          created_after: SINCE,
          created_before: { good: ['30m'], bad: { '2026-13-45T99:00:00Z': 'no such date' } },
        }),
      ),
    ),
    // The dashboard's routes: sign-in trades a token for a session (a wrong one is a 401), the overview's numbers, the processes.
    'POST /v1/session': post(
      path('/v1/session'),
      bodyCase(objectTok({ token: field({ good: ['acw_not-a-real-token'], bad: { '': 'empty' } }) }, { required: ['token'] })),
    ),
    'GET /v1/stats': get(
      path('/v1/stats', queryCase({ window: { good: ['1h', '24h'], bad: { '7d': 'not 1h or 24h', '': 'not 1h or 24h' } } })),
    ),
    'GET /v1/workers': get(path('/v1/workers', noQuery)),
    'GET /v1/jobs/:id and POST retry|cancel': fc.oneof(
      get(path('/v1/jobs/', jobId, noQuery)),
      post(path('/v1/jobs/', jobId, '/retry'), noBody),
      post(path('/v1/jobs/', jobId, '/cancel'), noBody),
    ),
    'POST /v1/jobs/redrive': post(
      path('/v1/jobs/redrive'),
      bodyCase(
        objectTok({
          status: field({ good: ['dead'], bad: { pending: 'only dead jobs are redriven' } }),
          topic: field({ good: ['a.b'], bad: { 'A.B': CAPITAL } }),
          endpoint: field({ good: ['cfg', 'stored-a'] }),
          since: field({ ...SINCE, bad: { ...SINCE.bad, '-1h': 'a sign' } }),
          dry_run: rawField({ good: ['true', 'false'] }),
        }),
      ),
    ),
    'GET /v1/alerts': get(
      path(
        '/v1/alerts',
        queryCase({
          limit: { good: ['10'], bad: { '501': 'over 500' } },
          cursor: CURSOR,
          action: { good: [...ALERT_ACTIONS, ALERT_ACTIONS.join(',')], bad: { nope: 'not an alert action' } },
        }),
      ),
    ),
    'GET /v1/alerts/stream': get(
      path(
        '/v1/alerts/stream',
        queryCase({
          since: { good: ['0', '1', '999999999999999'], bad: { '9999999999999999': 'over 15 digits' } },
          action: { good: [...ALERT_ACTIONS], bad: { nope: 'not an alert action' } },
        }),
      ),
    ),
    'GET /v1/notifications and POST :id/read': fc.oneof(
      get(
        path(
          '/v1/notifications',
          queryCase({
            limit: { good: ['10'], bad: { '0': 'under 1' } },
            cursor: CURSOR,
            unread_only: { good: ['true', '1', 'false'], bad: { yes: 'not true or false' } },
          }),
        ),
      ),
      post(
        path(
          '/v1/notifications/',
          segment({ good: ['1', '2', '999999999999999'], bad: { '9999999999999999': 'over 15 digits', '-1': 'not an id' } }),
          '/read',
        ),
        noBody,
      ),
    ),
    'GET /v1/endpoints and /v1/endpoints/:name': fc.oneof(
      get(path('/v1/endpoints', queryCase({ window_minutes: { good: ['1', '60', '10080'], bad: { '10081': 'over a week' } } }))),
      get(path('/v1/endpoints/', name(), noQuery)),
    ),
    'POST /v1/endpoints': post(
      path('/v1/endpoints'),
      bodyCase(
        objectTok(
          {
            name: field({
              good: ['fz-a', 'fz-b', 'stored-a', ...FRESH],
              bad: { cfg: "a config endpoint's name", 'Bad Name': 'not a name' },
            }),
            ...endpointFields,
            secret: field({ good: ['a-secret-of-16-chars', 'whsec_AAAAAAAAAAAAAAAAAAAAAAAA'], bad: { short: 'under 16 characters' } }),
          },
          {
            required: ['name', 'url', 'topics'],
            relate: (p) => {
              const secret = str(p, 'secret');
              return str(p, 'scheme') === 'standard' && secret !== undefined && !secret.startsWith('whsec_')
                ? breaks('secret: scheme standard needs a whsec_ secret')
                : GOOD;
            },
          },
        ),
      ),
    ),
    'PATCH /v1/endpoints/:name': post(
      path('/v1/endpoints/', anyName()),
      // Scheme standard is refused for an endpoint whose stored secret is not a whsec_ one.
      bodyCase(objectTok(endpointFields, { nonEmpty: true, relate: (p) => (str(p, 'scheme') === 'standard' ? ANY : GOOD) })),
      'admin',
      'PATCH',
    ),
    'DELETE /v1/endpoints/:name': post(
      path('/v1/endpoints/', name(), queryCase({ force: { good: ['true', 'false', '1'], bad: { yes: 'not true or false' } } })),
      noBody,
      'admin',
      'DELETE',
    ),
    'POST /v1/endpoints/:name/pause|resume|test': post(
      path(
        '/v1/endpoints/',
        name(),
        '/',
        fc.constantFrom('pause', 'resume', 'test').map((a) => ({ text: a, verdict: GOOD })),
      ),
      noBody,
    ),
    'POST /v1/endpoints/:name/rotate-secret': fc
      .tuple(
        // Each endpoint once: then its rotation is under way (409).
        anyName(),
        bodyCase(
          objectTok({
            overlap: field({ good: ['1h', '1m', '720h'], bad: { '721h': 'over 720h', '0s': 'under 1m', '30s': 'under 1m' } }),
            secret: field({ good: ['a-new-secret-of-16+'], bad: { short: 'under 16 characters', 'a new secret with spaces': 'a space' } }),
          }),
        ),
      )
      .map(([n, b]): Req => {
        // Endpoints made by the fuzz may be scheme standard, which takes only a whsec_ secret.
        const made = n.text.startsWith('fz-') && b.body?.includes('"secret"') === true;
        return {
          method: 'POST',
          path: `/v1/endpoints/${n.text}/rotate-secret`,
          body: b,
          token: 'admin',
          verdict: join(n.verdict, b.verdict, made ? ANY : GOOD),
        };
      }),
    'POST /v1/endpoints/:name/replay': post(
      path('/v1/endpoints/', name(), '/replay'),
      bodyCase(
        objectTok(
          {
            since: field({ good: ['1h', '2026-01-01T00:00:00Z'], bad: { '0s': 'not before until', yesterday: 'not a time' } }),
            until: field({ good: ['1m'], bad: { '2020-01-01T00:00:00Z': 'before since' } }),
            status: field({ good: ['dead', 'all'], bad: { completed: 'not dead or all' } }),
            dry_run: rawField({ good: ['true', 'false'] }),
            idempotency_key: field({ good: ['r1'], bad: { '': 'empty' } }),
          },
          { required: ['since'] },
        ),
      ),
    ),
  };
}

const NOTIFY_FIELDS = ['topic', 'data', 'recipients', 'idempotency_key'];
const ENDPOINT_FIELDS = Object.keys(endpointFields);

/** The body fields and query parameters each target knows (and, for a batch, each event's fields): anything else is refused. */
export const KNOWN: Record<string, { body: string[]; query: string[]; events?: string[] }> = {
  'POST /v1/notify': { body: NOTIFY_FIELDS, query: [] },
  'POST /v1/notify/batch': { body: ['events'], query: [], events: NOTIFY_FIELDS },
  'GET /v1/jobs': {
    body: [],
    query: ['status', 'type', 'topic', 'endpoint', 'event_id', 'limit', 'cursor', 'created_after', 'created_before'],
  },
  'POST /v1/session': { body: ['token'], query: [] },
  'GET /v1/stats': { body: [], query: ['window'] },
  'GET /v1/workers': { body: [], query: [] },
  'GET /v1/jobs/:id and POST retry|cancel': { body: [], query: [] },
  'POST /v1/jobs/redrive': { body: ['status', 'topic', 'endpoint', 'since', 'dry_run'], query: [] },
  'GET /v1/alerts': { body: [], query: ['limit', 'cursor', 'action'] },
  'GET /v1/alerts/stream': { body: [], query: ['since', 'action'] },
  'GET /v1/notifications and POST :id/read': { body: [], query: ['limit', 'cursor', 'unread_only'] },
  'GET /v1/endpoints and /v1/endpoints/:name': { body: [], query: ['window_minutes'] },
  'POST /v1/endpoints': { body: ['name', ...ENDPOINT_FIELDS, 'secret'], query: [] },
  'PATCH /v1/endpoints/:name': { body: ENDPOINT_FIELDS, query: [] },
  'DELETE /v1/endpoints/:name': { body: [], query: ['force'] },
  'POST /v1/endpoints/:name/pause|resume|test': { body: [], query: [] },
  'POST /v1/endpoints/:name/rotate-secret': { body: ['overlap', 'secret'], query: [] },
  'POST /v1/endpoints/:name/replay': { body: ['since', 'until', 'status', 'dry_run', 'idempotency_key'], query: [] },
};
