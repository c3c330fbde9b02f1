// For the HTTP tests: a real service + Fastify server on 127.0.0.1:0, users with tokens, a small client.
import { request as httpRequest } from 'node:http';
import type pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { createHttpServer, listenHttp } from '../../src/http/server.js';
import type { Service, ServiceOptions } from '../../src/service.js';
import type { Role } from '../../src/roles.js';
import { hashToken, newToken } from '../../src/users.js';
import { installContractCheck } from './contract.js';
import type { TestDatabase } from './db.js';
import { merge, startTestService } from './service.js';

export interface Api {
  svc: Service;
  app: FastifyInstance;
  url: string;
  events: (name: string) => Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * A service with its HTTP server listening on a free port; `close` stops both (server first). Every
 * answer it gives is checked against the OpenAPI document (test/helpers/contract.ts).
 */
export async function startApi(
  db: TestDatabase,
  over: Record<string, unknown> = {},
  mode: 'serve' | 'worker' = 'serve',
  extra: Partial<ServiceOptions> = {},
): Promise<Api> {
  const s = await startTestService(db, merge({ server: { max_body: '1mb' } }, over), extra);
  const app = await createHttpServer(s.svc, { mode, extend: installContractCheck });
  const bound = await listenHttp(app, '127.0.0.1:0');
  return {
    svc: s.svc,
    app,
    url: bound.url,
    events: s.events,
    close: async () => {
      await app.close();
      await s.svc.stop();
    },
  };
}

/** A user with a fresh token (inserted directly: the HTTP tests are not about `addUser`). */
export async function makeUser(pool: pg.Pool, name: string, role: Role): Promise<string> {
  const token = newToken();
  await pool.query(
    `insert into users (name, role, token_hash) values ($1, $2, $3)
     on conflict (name) do update set role = excluded.role, token_hash = excluded.token_hash, revoked_at = null`,
    [name, role, hashToken(token)],
  );
  return token;
}

export interface Res {
  status: number;
  headers: Headers;
  // JSON answers are typed loosely on purpose: tests assert on their shape.
  // oxlint-disable-next-line typescript/no-explicit-any
  body: any;
  text: string;
}

export interface CallOptions {
  token?: string | undefined;
  body?: unknown;
  /** Sent as is (malformed JSON, huge bodies). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/** One request with fetch; the body parsed as JSON when it is JSON. */
export async function call(base: string, method: string, path: string, o: CallOptions = {}): Promise<Res> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  let body: string | Buffer | undefined;
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) body = JSON.stringify(o.body);
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
    headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/**
 * POST a body with node:http and take the answer even when the server answers (413) and closes
 * before the upload finished, which fetch reports as a network error.
 */
export function postRaw(
  base: string,
  path: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const u = new URL(base + path);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-length': String(body.length), ...headers } },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.end(body);
  });
}

/** Row counts of every table a request could write, to prove a refusal wrote nothing. */
export async function rowCounts(pool: pg.Pool): Promise<Record<string, number>> {
  const tables = ['jobs', 'webhook_attempts', 'events', 'notifications', 'audit_log', 'users'];
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = (await pool.query<{ n: number }>(`select count(*)::int as n from ${t}`)).rows[0]!.n;
  return out;
}

/** Insert a job row directly in a given state (fixtures for retry/cancel/list). */
export async function insertJob(
  pool: pg.Pool,
  o: { status: string; topic?: string; endpoint?: string; eventId?: string | null; createdAgoMs?: number; updatedAgoMs?: number },
): Promise<string> {
  const res = await pool.query<{ id: string }>(
    `insert into jobs (type, payload, status, attempts, max_attempts, endpoint, event_id, created_at, updated_at, run_at, completed_at, last_error)
     values ('webhook.deliver', jsonb_build_object('topic', $2::text, 'body', '{}'), $1, case when $1 = 'pending' then 0 else 3 end, 3, $3, $4,
       now() - $5 * interval '1 millisecond', now() - $6 * interval '1 millisecond',
       case when $1 = 'pending' then now() + interval '1 hour' else now() end,
       case when $1 = 'completed' then now() end, case when $1 = 'dead' then 'HTTP 410' end)
     returning id`,
    [o.status, o.topic ?? 'a.b', o.endpoint ?? 'default', o.eventId ?? null, o.createdAgoMs ?? 0, o.updatedAgoMs ?? 0],
  );
  return res.rows[0]!.id;
}

/** The value of one sample in Prometheus text (labels in any order), or undefined when absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v) && Object.keys(got).length === Object.keys(labels).length)
      return Number(m[3]);
  }
  return undefined;
}
