// Property-based fuzzing of every /v1 route that takes a body or query (issue 18): generated hostile
// input, many requests at a time against one server with the runners off. Never a 5xx (but 503
// encryption_key_missing), never an unexpected error in the log, never a hang; every refusal a 4xx
// naming the field; a batch of refusals changes no table's row count.
import { Agent, request } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALERT_ACTIONS } from '../../src/admin/alerts.js';
import { JOB_STATUSES } from '../../src/admin/job-view.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { call, insertJob, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { bodyCase, cases, field, jsonTok, objectTok, queryCase, rawField, RUNS, SEED, segment, type BodyCase } from './arbitraries.js';

/** Requests in flight at once: enough to keep the server busy on two cores, few enough to keep the pool free. */
const CONCURRENCY = 32;
/** A request that takes longer is a hang (issue 18). */
const HANG_MS = 10_000;
/** Refusals per target sent again alone when their batch also wrote, to check they changed no table. */
const RECHECK = 100;

/** The real secret box: what it authenticates (the endpoint, which secret) is checked here too. */
const codec = codecOf(new SecretBox(randomBytes(32)))!;

let db: TestDatabase;
let api: Api;
let admin: string;
let service: string;
let jobIds: string[] = [];
/** One query counting every table of the schema (not only those rowCounts knows): a refusal may write none. */
let countSql = '';
const rowCounts = async (pool: TestDatabase['pool']): Promise<Record<string, number>> =>
  Object.fromEntries((await pool.query<{ t: string; n: number }>(countSql)).rows.map((r) => [r.t, r.n]));
const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const rejections: unknown[] = [];
const onRejection = (r: unknown) => rejections.push(r);

beforeAll(async () => {
  process.on('unhandledRejection', onRejection);
  db = await createTestDatabase();
  api = await startApi(
    db,
    {
      jobs: { enabled: false },
      notify: {
        webhook: {
          allow_networks: ['127.0.0.0/8'],
          service_endpoints: { topics: ['*'] },
          endpoints: [{ name: 'cfg', url: 'http://127.0.0.1:9/cfg', secret: 'cfg-secret-123456', topics: ['*'] }],
        },
      },
    },
    'serve',
    { secretCodec: codec },
  );
  const tables = await db.pool.query<{ name: string }>(`select tablename as name from pg_tables where schemaname = 'public' order by 1`);
  countSql = tables.rows.map((t) => `select '${t.name}' as t, count(*)::int as n from "${t.name}"`).join(' union all ');
  admin = await makeUser(db.pool, 'ops', 'admin');
  service = await makeUser(db.pool, 'svc', 'service');
  const created = await call(api.url, 'POST', '/v1/endpoints', {
    token: admin,
    body: { name: 'stored-a', url: 'http://127.0.0.1:9/a', topics: ['*'] },
  });
  if (created.status !== 201) throw new Error(`fixture: ${created.text}`);
  jobIds = [
    await insertJob(db.pool, { status: 'dead', endpoint: 'cfg' }),
    await insertJob(db.pool, { status: 'pending', endpoint: 'stored-a' }),
    await insertJob(db.pool, { status: 'completed', endpoint: 'cfg' }),
  ];
  const n = await call(api.url, 'POST', '/v1/notify', { token: service, body: { topic: 'a.b', data: {}, recipients: ['ops'] } });
  if (n.status !== 202) throw new Error(`fixture: ${n.text}`);
  console.log(`fuzz http: seed ${SEED}, ${RUNS} cases per target (FUZZ_SEED, FUZZ_RUNS to change)`);
});
afterAll(async () => {
  process.off('unhandledRejection', onRejection);
  agent.destroy();
  await api?.close();
  await db?.drop();
});

interface Req {
  method: string;
  path: string;
  body: BodyCase;
  token: 'admin' | 'service';
}

interface Answer {
  status: number;
  text: string;
  contentType: string;
}

/** One request with node:http: takes a 413 sent before the upload ended, and leaves an event stream once its head arrived. */
function send(r: Req): Promise<Answer> {
  const u = new URL(api.url);
  const headers: Record<string, string> = { authorization: `Bearer ${r.token === 'admin' ? admin : service}` };
  if (r.body.contentType !== undefined) headers['content-type'] = r.body.contentType;
  if (r.body.body !== undefined) headers['content-length'] = String(r.body.body.length);
  return new Promise((resolve, reject) => {
    let answered = false;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer within ${HANG_MS} ms`));
    }, HANG_MS);
    const req = request({ host: u.hostname, port: u.port, path: r.path, method: r.method, headers, agent }, (res) => {
      answered = true;
      const contentType = String(res.headers['content-type'] ?? '');
      if (res.statusCode === 200 && contentType.startsWith('text/event-stream')) {
        clearTimeout(timer);
        res.destroy();
        resolve({ status: 200, text: '', contentType });
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), contentType });
      });
      res.on('error', (err) => (clearTimeout(timer), reject(err)));
    });
    req.on('error', (err) => {
      if (answered) return;
      clearTimeout(timer);
      reject(err);
    });
    req.end(r.body.body);
  });
}

/** Why this answer breaks a property, or null. */
function violation(a: Answer): string | null {
  if (a.status >= 200 && a.status < 300) return null;
  let parsed: { error?: { code?: unknown; message?: unknown; details?: { field?: unknown } } } | undefined;
  try {
    parsed = JSON.parse(a.text) as typeof parsed;
  } catch {
    return `status ${a.status} without a JSON error body: ${a.text.slice(0, 200)}`;
  }
  const e = parsed?.error;
  if (typeof e?.code !== 'string' || typeof e.message !== 'string' || e.message === '')
    return `status ${a.status} without {error: {code, message}}`;
  if (a.status >= 500)
    return a.status === 503 && e.code === 'encryption_key_missing' ? null : `status ${a.status}: ${e.code}: ${e.message}`;
  if (a.status < 400) return `status ${a.status}`;
  // Bad input (not a missing or conflicting thing): the answer names the field, and the message starts with it.
  if ([400, 413, 415].includes(a.status)) {
    const f = e.details?.field;
    if (typeof f !== 'string' || f === '') return `status ${a.status} ${e.code} names no field: ${e.message}`;
    if (!e.message.includes(f)) return `status ${a.status}: message does not name ${f}: ${e.message}`;
  }
  return null;
}

interface Stats {
  answered: number;
  refused: number;
  batchesChecked: number;
  rechecked: number;
  statuses: Record<number, number>;
  /** How often each refusal message came, to see what the generators reach (FUZZ_SHOW=1). */
  messages: Record<string, number>;
}

/** Run the cases CONCURRENCY at a time; a batch answered only with refusals must leave every row count as it was. */
async function fuzz(name: string, reqs: fc.Arbitrary<Req>): Promise<Stats> {
  const all = cases(name, reqs);
  const stats: Stats = { answered: 0, refused: 0, batchesChecked: 0, rechecked: 0, statuses: {}, messages: {} };
  const started = Date.now();
  const errorsBefore = api.events('http.error').length;
  const mixed: Req[] = [];
  for (let i = 0; i < all.length; i += CONCURRENCY) {
    const batch = all.slice(i, i + CONCURRENCY);
    const before = await rowCounts(db.pool);
    const answers = await Promise.all(
      batch.map(async (r) => {
        const a = await send(r).catch((err: Error) => {
          throw new Error(`${name}: ${r.method} ${r.path.slice(0, 300)}: ${err.message}\nbody: ${describeBody(r.body)}`);
        });
        const why = violation(a) ?? acceptedUnknown(name, r, a);
        if (why) throw new Error(`${name}: ${r.method} ${r.path.slice(0, 300)}: ${why}\nbody: ${describeBody(r.body)}`);
        return a;
      }),
    );
    for (const a of answers) {
      stats.answered++;
      stats.statuses[a.status] = (stats.statuses[a.status] ?? 0) + 1;
      if (a.status >= 400) stats.refused++;
      if (process.env['FUZZ_SHOW']) {
        const m =
          a.status >= 400
            ? `${a.status} ${String((JSON.parse(a.text) as { error: { message: string } }).error.message).slice(0, 70)}`
            : String(a.status);
        stats.messages[m] = (stats.messages[m] ?? 0) + 1;
      }
    }
    // Refusals and reads write nothing: then no table may have changed.
    if (answers.every((a, j) => a.status >= 400 || batch[j]!.method === 'GET')) {
      stats.batchesChecked++;
      sameCounts(await rowCounts(db.pool), before, `${name}: refusals changed a table (cases ${i}..${i + batch.length - 1})`);
    } else {
      // A write in the batch hides what its refusals did: some of them are sent again alone below.
      batch.forEach((r, j) => answers[j]!.status >= 400 && r.method !== 'GET' && mixed.push(r));
    }
    const unexpected = api.events('http.error').slice(errorsBefore);
    if (unexpected.length > 0) {
      const e = unexpected[0]!;
      throw new Error(`${name}: unexpected error logged (${String(e['status'])} ${String(e['route'])}): ${String(e['err'])}`);
    }
    expect(rejections, 'an unhandled rejection').toEqual([]);
  }
  // Up to RECHECK refusals from batches that also wrote, one at a time: a refusal alone changes no row count.
  const step = Math.max(1, Math.ceil(mixed.length / RECHECK));
  for (let j = 0; j < mixed.length; j += step) {
    const r = mixed[j]!;
    const before = await rowCounts(db.pool);
    const a = await send(r);
    expect(violation(a), `${name}: ${r.method} ${r.path.slice(0, 300)}\nbody: ${describeBody(r.body)}`).toBeNull();
    if (a.status < 400) continue; // the state changed since (a name deleted, a key first used): no longer a refusal
    stats.rechecked++;
    sameCounts(
      await rowCounts(db.pool),
      before,
      `${name}: a refusal changed a table: ${r.method} ${r.path.slice(0, 300)}\nbody: ${describeBody(r.body)}`,
    );
  }
  console.log(
    `fuzz http ${name}: ${stats.answered} cases in ${Date.now() - started} ms, statuses ${JSON.stringify(stats.statuses)}, ${stats.batchesChecked} batches of refusals and reads checked for row counts, ${stats.rechecked} refusals from the others checked alone`,
  );
  return stats;
}

function sameCounts(after: Record<string, number>, before: Record<string, number>, what: string): void {
  const changed = Object.keys({ ...before, ...after }).filter((t) => before[t] !== after[t]);
  if (changed.length > 0)
    throw new Error(`${what}\nrows before/after: ${changed.map((t) => `${t} ${before[t]} -> ${after[t]}`).join(', ')}`);
}

function describeBody(b: BodyCase): string {
  if (b.body === undefined) return '(none)';
  const t = b.body.toString('utf8');
  return `${b.contentType ?? '(no content-type)'} ${b.body.length} bytes: ${t.length > 300 ? `${t.slice(0, 300)}…` : t}`;
}

// --- What is generated, per route ------------------------------------------------------------

const ENDPOINT_NAMES = ['cfg', 'stored-a', 'fz-a', 'fz-b', 'nope'];
const name = () => segment(...ENDPOINT_NAMES);
const noBody = bodyCase(objectTok({}));

const notifyObj = objectTok(
  {
    topic: field(['a.b', 'orders.created', 'x'], ['A.B', 'a..b', '']),
    data: jsonTok,
    recipients: rawField(['["ops"]', '[]', '["a","b"]'], ['["a b"]', '"ops"']),
    idempotency_key: field(['k1', 'key-2'], ['', 'a key']),
  },
  ['topic', 'data'],
);

const endpointFields = {
  url: field(
    ['http://127.0.0.1:9/x', 'https://127.0.0.1/y', 'http://localhost:9/'],
    ['ftp://127.0.0.1/', 'http://u:p@127.0.0.1/', 'http://10.0.0.1/', 'http://[::1]:9/'],
  ),
  topics: rawField(['["*"]', '["a.*"]', '["a.b","c"]'], ['[]', '["A B"]']),
  scheme: field(['acw', 'standard'], ['ACW']),
  headers: rawField(['{"X-A":"1"}', '{}'], ['{"Host":"x"}', '{"content-length":"1"}', '{"x-acw-signature":"s"}']),
  timeout: field(['1s', '100ms'], ['50ms', '61s', '1h']),
  max_in_flight: rawField(['1', '10'], ['0', '100000', '1.5']),
  rate_limit: rawField(['"20/s"', '"600/min"', '"none"', 'null'], ['"0/s"']),
  enabled: rawField(['true', 'false']),
  description: field(['what it is for', ''], ['\u0000']),
};

const post = (path: fc.Arbitrary<string>, body: fc.Arbitrary<BodyCase>, token: Req['token'] = 'admin', method = 'POST') =>
  fc.tuple(path, body).map(([p, b]): Req => ({ method, path: p, body: b, token }));
const get = (path: fc.Arbitrary<string>, token: Req['token'] = 'admin') =>
  path.map((p): Req => ({ method: 'GET', path: p, body: { body: undefined, contentType: undefined }, token }));

const targets: Record<string, fc.Arbitrary<Req>> = {
  'POST /v1/notify': post(fc.constant('/v1/notify'), bodyCase(notifyObj), 'service'),
  'POST /v1/notify/batch': post(
    fc.constant('/v1/notify/batch'),
    bodyCase(
      objectTok(
        { events: fc.oneof({ weight: 4, arbitrary: fc.array(notifyObj, { maxLength: 5 }).map((a) => `[${a.join(',')}]`) }, jsonTok) },
        ['events'],
      ),
    ),
    'service',
  ),
  'GET /v1/jobs': get(
    queryCase({
      status: [...JOB_STATUSES, 'DEAD'],
      type: ['webhook.deliver'],
      topic: ['a.b', 'A.B'],
      endpoint: ['cfg', 'stored-a'],
      event_id: [randomUUID(), 'not-a-uuid'],
      limit: ['10', '500', '501', '0'],
      cursor: ['abc', 'eyJ9'],
      created_after: ['1h', '2026-01-01T00:00:00Z', 'yesterday', '9999999h'],
      created_before: ['30m', '2026-13-45T99:00:00Z'],
    }).map((q) => `/v1/jobs${q}`),
  ),
  // The dashboard's routes: sign-in trades a token for a session (a wrong one is a 401), the overview's numbers, the processes.
  'POST /v1/session': post(fc.constant('/v1/session'), bodyCase(objectTok({ token: field(['acw_not-a-real-token'], ['']) }, ['token']))),
  'GET /v1/stats': get(queryCase({ window: ['1h', '24h', '7d', ''] }).map((q) => `/v1/stats${q}`)),
  'GET /v1/workers': get(queryCase({}).map((q) => `/v1/workers${q}`)),
  'GET /v1/jobs/:id and POST retry|cancel': fc
    .tuple(
      fc.constantFrom('GET', 'POST retry', 'POST cancel'),
      fc.oneof(segment('00000000-0000-0000-0000-000000000000', randomUUID()), fc.constantFrom('dead', 'pending', 'completed')),
      noBody,
      queryCase({}),
    )
    .map(([m, id, b, q]): Req => {
      const real = id === 'dead' ? jobIds[0]! : id === 'pending' ? jobIds[1]! : id === 'completed' ? jobIds[2]! : id;
      const [method, action] = m.split(' ') as [string, string | undefined];
      return {
        method,
        path: `/v1/jobs/${real}${action ? `/${action}` : q}`,
        body: method === 'GET' ? { body: undefined, contentType: undefined } : b,
        token: 'admin',
      };
    }),
  'POST /v1/jobs/redrive': post(
    fc.constant('/v1/jobs/redrive'),
    bodyCase(
      objectTok({
        status: field(['dead'], ['pending']),
        topic: field(['a.b']),
        endpoint: field(['cfg', 'stored-a']),
        since: field(['1h', '2026-01-01T00:00:00Z'], ['2026-13-45T99:00:00Z', '-1h', '9999999h']),
        dry_run: rawField(['true', 'false']),
      }),
    ),
  ),
  'GET /v1/alerts': get(
    queryCase({ limit: ['10', '501'], cursor: ['abc'], action: [...ALERT_ACTIONS, 'nope', ALERT_ACTIONS.join(',')] }).map(
      (q) => `/v1/alerts${q}`,
    ),
  ),
  'GET /v1/alerts/stream': get(
    queryCase({ since: ['0', '1', '999999999999999', '9999999999999999'], action: [...ALERT_ACTIONS, 'nope'] }).map(
      (q) => `/v1/alerts/stream${q}`,
    ),
  ),
  'GET /v1/notifications and POST :id/read': fc.oneof(
    get(queryCase({ limit: ['10', '0'], cursor: ['abc'], unread_only: ['true', '1', 'false', 'yes'] }).map((q) => `/v1/notifications${q}`)),
    post(
      segment('1', '2', '999999999999999', '9999999999999999', '-1').map((id) => `/v1/notifications/${id}/read`),
      noBody,
    ),
  ),
  'GET /v1/endpoints and /v1/endpoints/:name': fc.oneof(
    get(queryCase({ window_minutes: ['1', '60', '10080', '10081'] }).map((q) => `/v1/endpoints${q}`)),
    get(fc.tuple(name(), queryCase({})).map(([n, q]) => `/v1/endpoints/${n}${q}`)),
  ),
  'POST /v1/endpoints': post(
    fc.constant('/v1/endpoints'),
    bodyCase(
      objectTok(
        {
          name: field(['fz-a', 'fz-b', 'stored-a'], ['cfg', 'Bad Name']),
          ...endpointFields,
          secret: field(['a-secret-of-16-chars'], ['short', 'whsec_AAAAAAAAAAAAAAAAAAAAAAAA']),
        },
        ['name', 'url', 'topics'],
      ),
    ),
  ),
  'PATCH /v1/endpoints/:name': post(
    name().map((n) => `/v1/endpoints/${n}`),
    bodyCase(objectTok(endpointFields)),
    'admin',
    'PATCH',
  ),
  'DELETE /v1/endpoints/:name': post(
    fc.tuple(name(), queryCase({ force: ['true', 'false', '1', 'yes'] })).map(([n, q]) => `/v1/endpoints/${n}${q}`),
    noBody,
    'admin',
    'DELETE',
  ),
  'POST /v1/endpoints/:name/pause|resume|test': post(
    fc.tuple(name(), fc.constantFrom('pause', 'resume', 'test')).map(([n, a]) => `/v1/endpoints/${n}/${a}`),
    noBody,
  ),
  'POST /v1/endpoints/:name/rotate-secret': post(
    name().map((n) => `/v1/endpoints/${n}/rotate-secret`),
    bodyCase(objectTok({ overlap: field(['1h', '1m'], ['721h', '0s', '30s']), secret: field(['a-new-secret-of-16+'], ['short']) })),
  ),
  'POST /v1/endpoints/:name/replay': post(
    name().map((n) => `/v1/endpoints/${n}/replay`),
    bodyCase(
      objectTok(
        {
          since: field(['1h', '2026-01-01T00:00:00Z'], ['0s', 'yesterday']),
          until: field(['1m'], ['2020-01-01T00:00:00Z']),
          status: field(['dead', 'all'], ['completed']),
          dry_run: rawField(['true', 'false']),
          idempotency_key: field(['r1'], [' ']),
        },
        ['since'],
      ),
    ),
  ),
};

const NOTIFY_FIELDS = ['topic', 'data', 'recipients', 'idempotency_key'];
const ENDPOINT_FIELDS = Object.keys(endpointFields);

/** The body fields and query parameters each target knows (and, for a batch, each event's fields): anything else is refused. */
const KNOWN: Record<string, { body: string[]; query: string[]; events?: string[] }> = {
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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A success for a request carrying a field or parameter the route does not know: the strict check is gone. */
function acceptedUnknown(target: string, r: Req, a: Answer): string | null {
  if (a.status >= 300) return null;
  const known = KNOWN[target]!;
  const unknown: string[] = [];
  let body: unknown;
  try {
    body = r.body.body === undefined ? undefined : JSON.parse(r.body.body.toString('utf8'));
  } catch {
    body = undefined;
  }
  if (isObject(body)) {
    unknown.push(...Object.keys(body).filter((k) => !known.body.includes(k)));
    const events = body['events'];
    if (known.events && Array.isArray(events))
      for (const e of events) if (isObject(e)) unknown.push(...Object.keys(e).filter((k) => !known.events!.includes(k)));
  }
  const q = r.path.indexOf('?');
  if (q >= 0)
    for (const pair of r.path.slice(q + 1).split('&')) {
      const k = pair.split('=')[0]!;
      let key: string;
      try {
        key = decodeURIComponent(k.replaceAll('+', ' '));
      } catch {
        continue;
      }
      if (key !== '' && !known.query.includes(key)) unknown.push(`?${key}`);
    }
  return unknown.length > 0 ? `status ${a.status} for unknown ${unknown.map((u) => JSON.stringify(u)).join(', ')}` : null;
}

describe(`fuzzing the HTTP API (seed ${SEED}, ${RUNS} cases per target)`, () => {
  for (const [target, arb] of Object.entries(targets)) {
    it(`${target}`, { timeout: 600_000 }, async () => {
      const s = await fuzz(target, arb);
      if (process.env['FUZZ_SHOW']) console.log(s.messages);
      expect(s.answered).toBe(RUNS);
    });
  }
});
