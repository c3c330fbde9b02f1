// Property-based fuzzing of every /v1 route that takes a body or query (issue 18): generated hostile
// input, many requests at a time against one server with the runners off. Never a 5xx (but 503
// encryption_key_missing), never an unexpected error in the log, never a hang; every refusal a 4xx
// naming the field; a batch of refusals changes no table's row count. Each generated value is
// tagged valid or with the rule it breaks (http-targets.ts): a request breaking a rule is never a
// 2xx, and one whose every value is valid is never refused as bad input.
import { Agent, request } from 'node:http';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { codecOf } from '../../src/endpoints/store.js';
import { call, insertJob, makeUser, startApi, type Api } from '../helpers/api.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { cases, RUNS, SEED } from './arbitraries.js';
import type { BodyCase } from './tagged.js';
import { KNOWN, targets, type Req } from './http-targets.js';

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
let jobIds: Record<'dead' | 'pending' | 'completed', string>;
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
  // Whole tables, a partitioned one as one (its partitions are counted through it, not again).
  const tables = await db.pool.query<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`,
  );
  countSql = tables.rows.map((t) => `select '${t.name}' as t, count(*)::int as n from "${t.name}"`).join(' union all ');
  admin = await makeUser(db.pool, 'ops', 'admin');
  service = await makeUser(db.pool, 'svc', 'service');
  const created = await call(api.url, 'POST', '/v1/endpoints', {
    token: admin,
    body: { name: 'stored-a', url: 'http://127.0.0.1:9/a', topics: ['*'] },
  });
  if (created.status !== 201) throw new Error(`fixture: ${created.text}`);
  jobIds = {
    dead: await insertJob(db.pool, { status: 'dead', endpoint: 'cfg' }),
    pending: await insertJob(db.pool, { status: 'pending', endpoint: 'stored-a' }),
    completed: await insertJob(db.pool, { status: 'completed', endpoint: 'cfg' }),
  };
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

/** Refusals of the input itself; the other 4xx (401, 403, 404, 409) depend on who asks and on the rows. */
const INPUT_REFUSALS = new Set([400, 413, 414, 415, 422]);

/** A request breaking a rule that was accepted, or one breaking none that was refused as bad input. */
function misjudged(r: Req, a: Answer): string | null {
  const v = r.verdict;
  if (v.broken.length > 0 && a.status < 300) return `status ${a.status} for input that breaks: ${v.broken.join('; ')}`;
  if (v.broken.length === 0 && v.decided && INPUT_REFUSALS.has(a.status))
    return `status ${a.status} for input that breaks no rule: ${a.text.slice(0, 300)}`;
  return null;
}

interface Stats {
  answered: number;
  refused: number;
  batchesChecked: number;
  rechecked: number;
  statuses: Record<number, number>;
  /** Cases the oracle decided: carrying a broken rule, or valid throughout. */
  bad: number;
  good: number;
  /** Rules broken in some case, and those broken alone (everything else in the request valid). */
  rules: Set<string>;
  alone: Set<string>;
  /** How often each refusal message came, to see what the generators reach (FUZZ_SHOW=1). */
  messages: Record<string, number>;
}

/** Run the cases CONCURRENCY at a time; a batch answered only with refusals must leave every row count as it was. */
async function fuzz(name: string, reqs: fc.Arbitrary<Req>): Promise<Stats> {
  const all = cases(name, reqs);
  const stats: Stats = {
    answered: 0,
    refused: 0,
    batchesChecked: 0,
    rechecked: 0,
    statuses: {},
    bad: 0,
    good: 0,
    rules: new Set(),
    alone: new Set(),
    messages: {},
  };
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
        const why = violation(a) ?? misjudged(r, a) ?? acceptedUnknown(name, r, a);
        if (why) throw new Error(`${name}: ${r.method} ${r.path.slice(0, 300)}: ${why}\nbody: ${describeBody(r.body)}`);
        return a;
      }),
    );
    for (const [j, a] of answers.entries()) {
      const v = batch[j]!.verdict;
      if (v.broken.length > 0) stats.bad++;
      else if (v.decided) stats.good++;
      // A rule by field, whichever event of a batch broke it.
      const rules = v.broken.map((b) => b.replace(/\[\d+\]/g, '[]'));
      for (const rule of rules) stats.rules.add(rule);
      if (rules.length === 1 && v.decided) stats.alone.add(rules[0]!);
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
  const never = [...stats.rules].filter((r) => !stats.alone.has(r));
  console.log(
    `fuzz http ${name}: ${stats.answered} cases in ${Date.now() - started} ms, statuses ${JSON.stringify(stats.statuses)}, ${stats.bad} breaking a rule (${stats.alone.size} of ${stats.rules.size} rules alone in some case) and ${stats.good} valid throughout, ${stats.batchesChecked} batches of refusals and reads checked for row counts, ${stats.rechecked} refusals from the others checked alone`,
  );
  if (process.env['FUZZ_SHOW']) console.log(`never alone: ${JSON.stringify(never)}`);
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
  // Built when the fixtures exist (their job ids are in the paths); the names are known before.
  for (const target of Object.keys(KNOWN)) {
    it(`${target}`, { timeout: 600_000 }, async () => {
      const s = await fuzz(target, targets({ jobIds })[target]!);
      if (process.env['FUZZ_SHOW']) console.log(s.messages);
      expect(s.answered).toBe(RUNS);
    });
  }
});
