// Secrets never leak (issue 18): the whole delivery path, the API, the CLI and /metrics run with
// known secrets and tokens; every log line, API answer, CLI output and error, /metrics, audit row
// and table row (stored endpoints' header values included: they are sealed at rest) is collected,
// and none holds a secret in plain text, base64 or hex. Every request and CLI run is checked to
// have been answered as intended (the refusal it was meant to be, or a success): an early 401 or a
// configuration failure would otherwise pass as "nothing leaked".
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer, listenHttp } from '../../src/http/server.js';
import { call, makeUser, type Res } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/logs.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { merge, startTestService } from '../helpers/service.js';
import { runCliInProcess } from './cli-in-process.js';

const rand = (prefix: string) => `${prefix}-${randomBytes(12).toString('hex')}`;

const S = {
  configSecret: rand('cfgsecret'),
  configSecretNext: rand('cfgnext'),
  headerToken: rand('hdrtoken'),
  apiKey: rand('apikey'),
  urlPassword: rand('urlpass'),
  storedSecret: rand('storedsecret'),
  patchedHeader: rand('patchedhdr'),
  cliHeader: rand('clihdr'),
  rotatedSecret: rand('rotatedsecret'),
  refusedSecret: rand('refusedsecret'),
  adminToken: '',
  serviceToken: '',
  viewerToken: '',
  encryptionKey: randomBytes(32).toString('base64'),
};

/**
 * The dashboard's session routes (being built in parallel): add each here when it lands, with the
 * body that logs in (a known password or token), so its answers, cookies and logs are scanned too.
 */
const DASHBOARD_SESSION_ROUTES: Array<{ method: string; path: string; body?: unknown; token?: 'admin' | 'viewer' }> = [
  { method: 'POST', path: '/v1/session', body: { token: 'wrong-token-for-the-leak-test' } },
  { method: 'GET', path: '/v1/session', token: 'viewer' },
  { method: 'GET', path: '/v1/stats?window=24h' },
  { method: 'GET', path: '/v1/workers' },
  { method: 'DELETE', path: '/v1/session' },
];

/** Every form a secret could take in text: as is, base64, base64url, hex (and for the key, its bytes in hex and base64url). */
function forms(): Array<{ name: string; form: string }> {
  const out: Array<{ name: string; form: string }> = [];
  for (const [name, value] of Object.entries(S)) {
    const bytes = name === 'encryptionKey' ? Buffer.from(value, 'base64') : Buffer.from(value, 'utf8');
    const all = new Set([
      value,
      Buffer.from(value).toString('base64'),
      Buffer.from(value).toString('base64url'),
      Buffer.from(value).toString('hex'),
    ]);
    for (const f of [bytes.toString('hex'), bytes.toString('base64'), bytes.toString('base64url')]) all.add(f);
    // base64 of a longer text may end differently: the first 24 characters of each form are enough to find it.
    for (const f of all) out.push({ name, form: f.length > 24 ? f.slice(0, 24) : f });
  }
  return out;
}

let db: TestDatabase;
let rx: Receiver;
let dir: string;
let configFile: string;
let close: () => Promise<void>;
let base: string;
let rawLogs: () => string;
/** Everything collected: [where, text]. */
const seen: Array<[string, string]> = [];
const signatures = new Set<string>();

const answer = (where: string, r: Res) => {
  seen.push([`${where} -> ${r.status}`, `${JSON.stringify([...r.headers])}\n${r.text}`]);
  return r;
};
/** What each request and CLI run came to, against what it was meant to: [where, status or exit code, error code or field]. */
const outcomes: Array<{ where: string; got: string; want: string }> = [];
const expectAnswer = (where: string, r: Res, status: number, what = '') => {
  answer(where, r);
  const field = r.body?.error?.details?.field ?? '';
  outcomes.push({ where, got: `${r.status} ${r.body?.error?.code ?? ''} ${what === '' ? '' : field}`, want: `${status} ${what}` });
  return r;
};

beforeAll(async () => {
  db = await createTestDatabase();
  rx = await startReceiver();
  // The receiver fails the first tries, echoing every request header back in its error body (a
  // careless receiver): the signature, the Authorization header and the URL's password then come
  // back in the answer the service records as the attempt's error.
  let calls = 0;
  rx.setResponder((req) => {
    calls++;
    for (const h of ['x-acw-signature', 'x-acw-signature-next', 'webhook-signature']) {
      const v = req.headers[h];
      if (typeof v === 'string') for (const part of v.split(/[ ,]+/)) if (part.length > 20) signatures.add(part.replace(/^sha256=/, ''));
    }
    if (calls <= 3) return { status: 500, body: `failed: ${JSON.stringify(req.headers)}` };
    return { status: 200 };
  });
  dir = mkdtempSync(join(tmpdir(), 'acw-leak-'));
  const rxUrl = new URL(rx.url);
  const over = {
    secrets: { encryption_key: S.encryptionKey },
    server: { max_body: '1mb' },
    jobs: { max_attempts: 5, retry: { base: '20ms', max: '50ms', jitter: 0 } },
    notify: {
      webhook: {
        allow_networks: ['127.0.0.0/8'],
        service_endpoints: { topics: ['*'] },
        endpoints: [
          {
            name: 'cfg',
            url: `http://user:${S.urlPassword}@${rxUrl.host}/cfg`,
            secret: S.configSecret,
            secret_next: S.configSecretNext,
            rotate_until: new Date(Date.now() + 3_600_000).toISOString(),
            topics: ['leak.*'],
            // Authorization is censored by name in every log line; X-Api-Key only by the config's masking.
            headers: { Authorization: `Bearer ${S.headerToken}`, 'X-Api-Key': S.apiKey },
          },
        ],
      },
    },
  };
  const s = await startTestService(db, over);
  rawLogs = s.raw;
  const app = await createHttpServer(s.svc, { mode: 'serve' });
  base = (await listenHttp(app, '127.0.0.1:0')).url;
  close = async () => {
    await app.close();
    await s.svc.stop();
  };
  S.adminToken = await makeUser(db.pool, 'leak-admin', 'admin');
  S.serviceToken = await makeUser(db.pool, 'leak-svc', 'service');
  S.viewerToken = await makeUser(db.pool, 'leak-viewer', 'viewer');
  // The CLI reads the same configuration from a file (with the test database's URL).
  configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, JSON.stringify(merge({ database: { url: db.url, migrate: false }, log: { level: 'debug' } }, over)));
});
afterAll(async () => {
  await close?.();
  await rx?.close();
  await db?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('secrets never leak', () => {
  it(
    'no log line, API answer, CLI output, error, /metrics, audit or table row holds a secret, a token or a signature',
    { timeout: 120_000 },
    async () => {
      const admin = { token: S.adminToken };
      // A stored endpoint with a given secret, at the echoing receiver; then its secret rotated.
      const created = await call(base, 'POST', '/v1/endpoints', {
        ...admin,
        body: {
          name: 'stored',
          url: `${rx.url}/stored`,
          topics: ['leak.*'],
          secret: S.storedSecret,
          headers: { 'X-Api-Key': S.headerToken },
        },
      });
      expect(created.status).toBe(201);
      // The one answer that carries a secret, by design, in its `secret` field only.
      expect(created.body.secret).toBe(S.storedSecret);
      answer('POST /v1/endpoints (secret field removed)', { ...created, text: JSON.stringify({ ...created.body, secret: undefined }) });
      const rotated = await call(base, 'POST', '/v1/endpoints/stored/rotate-secret', {
        ...admin,
        body: { secret: S.rotatedSecret, overlap: '1h' },
      });
      expect(rotated.status).toBe(200);
      expect(rotated.body.secret_next).toBe(S.rotatedSecret);
      answer('POST rotate-secret (secret_next field removed)', {
        ...rotated,
        text: JSON.stringify({ ...rotated.body, secret_next: undefined }),
      });

      // One with no rotation under way, for the CLI's refusal of a bad --secret below.
      expectAnswer(
        'POST /v1/endpoints no rotation',
        await call(base, 'POST', '/v1/endpoints', { ...admin, body: { name: 'norot', url: `${rx.url}/norot`, topics: ['none.x'] } }),
        201,
      );

      // Deliveries: failing first (the echo), then delivered.
      for (let i = 0; i < 3; i++)
        answer(
          'POST /v1/notify',
          await call(base, 'POST', '/v1/notify', { token: S.serviceToken, body: { topic: `leak.t${i}`, data: { i } } }),
        );
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from jobs where status in ('pending', 'running')`)).rows.length === 0 && rx.requests.length >= 6,
        30_000,
      );
      expect(signatures.size).toBeGreaterThan(0);

      // Refusals that carry a secret in the input: the error must not echo it.
      expectAnswer(
        'POST /v1/endpoints bad url',
        await call(base, 'POST', '/v1/endpoints', {
          ...admin,
          body: { name: 'x', url: `http://u:${S.refusedSecret}@127.0.0.1/`, topics: ['*'] },
        }),
        400,
        'invalid_input url',
      );
      expectAnswer(
        'POST /v1/endpoints bad secret',
        await call(base, 'POST', '/v1/endpoints', { ...admin, body: { name: 'x', url: rx.url, topics: ['*'], secret: [S.refusedSecret] } }),
        400,
        'invalid_input secret',
      );
      expectAnswer(
        'POST /v1/endpoints bad header',
        await call(base, 'POST', '/v1/endpoints', {
          ...admin,
          body: { name: 'x', url: rx.url, topics: ['*'], headers: { 'Bad Header': S.refusedSecret } },
        }),
        400,
        'invalid_input headers.Bad Header',
      );
      expectAnswer(
        'PATCH bad header',
        await call(base, 'PATCH', '/v1/endpoints/stored', { ...admin, body: { headers: { 'X-Api-Key': S.refusedSecret, Host: 'x' } } }),
        400,
        'invalid_input headers.Host',
      );
      expectAnswer(
        'rotate-secret too long',
        await call(base, 'POST', '/v1/endpoints/stored/rotate-secret', { ...admin, body: { secret: S.refusedSecret.repeat(20) } }),
        400,
        'invalid_input secret',
      );
      expectAnswer(
        'rotate-secret bad overlap',
        await call(base, 'POST', '/v1/endpoints/stored/rotate-secret', { ...admin, body: { secret: S.refusedSecret, overlap: '0s' } }),
        400,
        'invalid_input overlap',
      );
      expectAnswer('wrong token', await call(base, 'GET', '/v1/jobs', { token: `${S.adminToken}x` }), 401, 'unauthorized authorization');
      expectAnswer(
        'viewer writes',
        await call(base, 'POST', '/v1/notify', { token: S.viewerToken, body: { topic: 'leak.x', data: {} } }),
        403,
        'forbidden',
      );
      expectAnswer(
        'malformed JSON with a secret',
        await call(base, 'POST', '/v1/endpoints', { ...admin, raw: `{"secret":"${S.refusedSecret}",` }),
        400,
        'invalid_json body',
      );
      // A header value changed (sealed again), through the API; the CLI changes one below.
      expectAnswer(
        'PATCH headers',
        await call(base, 'PATCH', '/v1/endpoints/stored', { ...admin, body: { headers: { 'X-Api-Key': S.patchedHeader } } }),
        200,
      );

      // Everything a reader can see.
      const jobs = expectAnswer('GET /v1/jobs', await call(base, 'GET', '/v1/jobs?limit=500', admin), 200);
      expect(jobs.body.items.length).toBeGreaterThan(0);
      for (const j of jobs.body.items as Array<{ id: string }>)
        expectAnswer(`GET /v1/jobs/${j.id}`, await call(base, 'GET', `/v1/jobs/${j.id}`, admin), 200);
      for (const path of [
        '/v1/endpoints',
        '/v1/endpoints/cfg',
        '/v1/endpoints/stored',
        '/v1/alerts',
        '/v1/notifications',
        '/metrics',
        '/readyz',
        '/healthz',
      ])
        expectAnswer(`GET ${path}`, await call(base, 'GET', path, admin), 200);
      expectAnswer('GET /v1/endpoints as a service', await call(base, 'GET', '/v1/endpoints', { token: S.serviceToken }), 200);
      expectAnswer('POST /v1/endpoints/cfg/test', await call(base, 'POST', '/v1/endpoints/cfg/test', admin), 202);
      // The dashboard's session and overview routes.
      for (const r of DASHBOARD_SESSION_ROUTES)
        answer(
          `${r.method} ${r.path}`,
          await call(base, r.method, r.path, { token: r.token === 'viewer' ? S.viewerToken : S.adminToken, body: r.body }),
        );

      // The CLI against the same database and configuration: output and errors.
      // Each with its exit code (0 ok, 1 failure, 2 usage) and, for a refusal, the key its message names.
      const cli = async (argv: string[], code: 0 | 1 | 2, names = '') => {
        const o = await runCliInProcess(argv, { ACW_CONFIG: configFile });
        const where = `cli ${argv.join(' ')}`;
        seen.push([`${where} -> ${o.code}`, `${o.stdout}\n${o.stderr}`]);
        const text = `${o.stdout}${o.stderr}`;
        const said = names === '' || text.includes(names) ? names : `(said: ${text.slice(0, 300)})`;
        outcomes.push({ where, got: `exit ${o.code} ${said}`, want: `exit ${code} ${names}` });
        return o;
      };
      await cli(['config', 'check'], 0);
      expect(JSON.parse((await cli(['jobs', 'list', '--limit', '500'], 0)).stdout.split('\n')[0]!).id).toBeDefined();
      for (const j of jobs.body.items as Array<{ id: string }>) await cli(['jobs', 'show', j.id], 0);
      await cli(['endpoints', 'list'], 0);
      await cli(['endpoints', 'show', 'cfg'], 0);
      expect(JSON.parse((await cli(['endpoints', 'show', 'stored'], 0)).stdout).name).toBe('stored');
      await cli(['users', 'list'], 0);
      await cli(['alerts'], 0);
      await cli(['endpoints', 'update', 'stored', '--header', `Bad Header=${S.refusedSecret}`], 2, 'headers.Bad Header');
      await cli(['endpoints', 'add', 'x', '--url', `http://u:${S.refusedSecret}@127.0.0.1/`, '--topics', '*'], 2, 'url: ');
      await cli(
        ['endpoints', 'rotate-secret', 'norot', '--secret', `${S.refusedSecret} x`],
        2,
        'secret: expected printable characters without spaces',
      );
      await cli(
        [
          'verify',
          '--secret',
          S.configSecret,
          '--timestamp',
          String(Math.floor(Date.now() / 1000)),
          '--signature',
          `sha256=${'0'.repeat(64)}`,
          '--body',
          'x',
        ],
        1,
        'signature_mismatch',
      );
      await cli(['notify', 'leak.cli', '--data', `{"secret": ${JSON.stringify(S.refusedSecret)}`], 2, '--data');
      // A header value changed through the CLI (sealed with the key of the config file).
      await cli(['endpoints', 'update', 'stored', '--header', `X-Api-Key=${S.cliHeader}`], 0);
      expect(outcomes.filter((o) => o.got.trim() !== o.want.trim())).toEqual([]);

      // Audit rows and every table's rows (endpoint secrets and header values are stored sealed, tokens hashed).
      const tables = await db.pool.query<{ name: string }>(`select tablename as name from pg_tables where schemaname = 'public'`);
      expect(tables.rows.map((t) => t.name)).toContain('endpoints');
      for (const { name } of tables.rows) {
        const rows = await db.pool.query(`select * from "${name}"`);
        seen.push([`table ${name}`, JSON.stringify(rows.rows)]);
      }
      // The CLI's header reached the row (sealed): the scan above had it to look at.
      const stored = await db.pool.query<{ headers: Record<string, string> }>(`select headers from endpoints where name = 'stored'`);
      expect(Object.keys(stored.rows[0]!.headers)).toEqual(['X-Api-Key']);
      const logs = rawLogs();
      expect(logs.split('\n').length).toBeGreaterThan(20);
      seen.push(['log', logs]);

      const found: string[] = [];
      for (const [where, text] of seen) {
        for (const { name, form } of forms()) if (text.includes(form)) found.push(`${name} (${form}) in ${where}`);
        // Signatures belong on the wire only: not in a log line, an answer or a table.
        for (const sig of signatures) if (text.includes(sig.slice(0, 24))) found.push(`a delivery signature in ${where}`);
      }
      const excerpt = (f: string) => {
        const [where] = f.split(' in ').slice(-1);
        const text = seen.find(([w]) => w === where)?.[1] ?? '';
        const form = /\(([^)]+)\)/.exec(f)?.[1] ?? '';
        const at = form ? text.indexOf(form) : -1;
        return at >= 0 ? `${f}: …${text.slice(Math.max(0, at - 120), at + 60)}…` : f;
      };
      expect(found.map(excerpt)).toEqual([]);
    },
  );
});
