// Shared parts of the chaos scenarios (test/chaos/README.md): real `serve` and `worker` processes
// spawned from the built package, receivers on 127.0.0.1 that verify every signature and can
// misbehave, and the checks every scenario ends with.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { expect } from 'vitest';
import { waitFor } from '../helpers/logs.js';
import { startProc, type Proc } from '../helpers/procs.js';

/** Multiplies every count (ACW_CHAOS_SCALE=0.2 in a hurry); each scenario keeps a floor so it still means something. */
export const SCALE = (() => {
  const raw = process.env.ACW_CHAOS_SCALE ?? '1';
  const n = Number(raw);
  if (!(n > 0 && n <= 10)) throw new Error(`ACW_CHAOS_SCALE: expected a number above 0 and at most 10, got ${JSON.stringify(raw)}`);
  return n;
})();

export function scaled(n: number, min: number): number {
  return Math.max(min, Math.round(n * SCALE));
}

export const BIN = fileURLToPath(new URL('../../bin/acw-webhooks.js', import.meta.url));

export const TOKENS = {
  service: 'chaos-service-token-0000000001',
  ops: 'chaos-admin-token-00000000001',
  oncall: 'chaos-admin-token-00000000002',
};
/** Two admins, so "one notification per admin per dead job" is tested with more than one. */
export const ADMINS = ['ops', 'oncall'];

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A temporary directory for config files, removed by cleanup(). */
export function workDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'acw-chaos-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface EndpointSpec {
  name: string;
  url: string;
  secret: string;
  timeout?: string;
  max_in_flight?: number;
}

/** The jobs keys a scenario sets (short leases and reaper intervals: with the defaults a rescue takes 6 minutes). */
export interface JobsSpec {
  workers?: number;
  shutdown_grace?: string;
  max_attempts?: number;
  poll_interval?: string;
  retry?: { base: string; max: string; jitter?: number };
  job_reaper?: { interval: string; lease_timeout: string };
}

/** Write a config file (JSON is YAML) for the spawned processes; the database comes from DATABASE_URL. */
export function writeConfig(
  dir: string,
  name: string,
  endpoints: EndpointSpec[],
  jobs: JobsSpec,
  webhook: Record<string, unknown> = {},
): string {
  const config = {
    server: {
      auth: {
        users: [
          { name: 'svc', role: 'service', token: TOKENS.service },
          { name: 'ops', role: 'admin', token: TOKENS.ops },
          { name: 'oncall', role: 'admin', token: TOKENS.oncall },
        ],
      },
    },
    log: { level: 'info' },
    jobs: {
      workers: 32,
      shutdown_grace: '2s',
      max_attempts: 5,
      poll_interval: '500ms',
      retry: { base: '100ms', max: '500ms', jitter: 0 },
      job_purge: { enabled: false },
      ...jobs,
      job_reaper: { enabled: true, interval: '1s', lease_timeout: '4s', ...jobs.job_reaper },
    },
    notify: { webhook: { ...webhook, endpoints: endpoints.map((e) => ({ timeout: '2s', ...e, topics: ['chaos.*'] })) } },
  };
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

export interface ServiceProc extends Proc {
  kind: 'serve' | 'worker';
  /** http://127.0.0.1:PORT of its API (serve) or health routes (worker). */
  url: string;
}

const started: Proc[] = [];

/** `node bin/acw-webhooks.js serve|worker -c FILE --listen 127.0.0.1:0`, resolved once it listens. */
export async function startService(kind: 'serve' | 'worker', config: string, databaseUrl: string): Promise<ServiceProc> {
  const p = startProc(process.execPath, [BIN, kind, '-c', config, '--listen', '127.0.0.1:0'], { DATABASE_URL: databaseUrl });
  started.push(p);
  const line = await p.waitForLine(/"service\.listening"/, 60_000);
  const url = (JSON.parse(line) as { address: string }).address;
  return Object.assign(p, { kind, url });
}

/** SIGKILL whatever a scenario started and is still running (a failed scenario leaves nothing behind). */
export async function killStarted(): Promise<void> {
  await Promise.all(started.splice(0).map((p) => p.stop('SIGKILL')));
}

/** The worker id prefix (`host:pid:`) of a process, as `jobs.locked_by` holds it. */
export function lockedByPrefix(p: Proc): string {
  return `%:${p.pid}:%`;
}

// --- receivers

/** What a receiver does with one request. */
export interface Plan {
  /** Default 200. */
  status?: number;
  delayMs?: number;
  /** Never answer. */
  hang?: boolean;
  /** Close the connection without any answer. */
  destroy?: boolean;
  /** Send a 200 head promising more body than is sent, then close the connection. */
  truncate?: boolean;
  /** Answer with a body of this many bytes. */
  bodyBytes?: number;
}

export interface Delivery {
  /** X-ACW-Event-Id: the job id. */
  jobId: string;
  /** The body's event_id. */
  eventId: string | undefined;
  validSignature: boolean;
  /** A 2xx status went out on a connection still open: the receiver took the delivery. */
  acked: boolean;
  /** X-ACW-Ordering-Key and X-ACW-Sequence, for a keyed event. */
  orderingKey?: string | undefined;
  sequence?: number | undefined;
}

/** `n` is how many requests this receiver has had for the job so far, this one included. */
export type Behaviour = (n: number, jobId: string) => Plan;

export interface ChaosReceiver {
  name: string;
  url: string;
  secret: string;
  deliveries: Delivery[];
  setBehaviour(b: Behaviour): void;
  /** Requests received so far (a delivery is recorded when its body has arrived). */
  readonly count: number;
  /** Resolves once `n` requests have arrived in all. */
  waitForCount(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function validSignature(secret: string, req: IncomingMessage, body: Buffer): boolean {
  const ts = req.headers['x-acw-timestamp'];
  const sig = req.headers['x-acw-signature'];
  if (typeof ts !== 'string' || typeof sig !== 'string') return false;
  const mac = createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex');
  return sig === `sha256=${mac}`;
}

export async function startChaosReceiver(name: string, behaviour: Behaviour = () => ({})): Promise<ChaosReceiver> {
  const secret = `chaos-secret-${name}`;
  let plan = behaviour;
  const deliveries: Delivery[] = [];
  const perJob = new Map<string, number>();
  const open = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void): void => {
    const t = setTimeout(() => (timers.delete(t), fn()), ms);
    timers.add(t);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const jobId = String(req.headers['x-acw-event-id'] ?? '');
      let eventId: string | undefined;
      try {
        eventId = (JSON.parse(body.toString('utf8')) as { event_id?: string }).event_id;
      } catch {
        eventId = undefined;
      }
      const d: Delivery = { jobId, eventId, validSignature: validSignature(secret, req, body), acked: false };
      const key = req.headers['x-acw-ordering-key'];
      if (typeof key === 'string') {
        d.orderingKey = key;
        d.sequence = Number(req.headers['x-acw-sequence']);
      }
      deliveries.push(d);
      const n = (perJob.get(jobId) ?? 0) + 1;
      perJob.set(jobId, n);
      const p = plan(n, jobId);
      res.on('error', () => undefined);
      const answer = (): void => {
        const socket = req.socket;
        if (socket.destroyed) return; // the sender gave up first: nothing was taken
        if (p.destroy) {
          socket.destroy();
          return;
        }
        if (p.truncate) {
          socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1000\r\n\r\npartial');
          d.acked = true;
          later(10, () => socket.destroy());
          return;
        }
        const status = p.status ?? 200;
        const out = p.bodyBytes ? Buffer.alloc(p.bodyBytes, 0x61) : Buffer.from('ok');
        res.writeHead(status, { 'content-type': 'text/plain', 'content-length': String(out.length) });
        d.acked = status >= 200 && status < 300;
        res.end(out);
      };
      if (p.hang) return;
      if (p.delayMs) later(p.delayMs, answer);
      else answer();
    });
  });
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    name,
    url: `http://127.0.0.1:${port}/${name}`,
    secret,
    deliveries,
    setBehaviour: (b) => (plan = b),
    get count() {
      return deliveries.length;
    },
    waitForCount: async (n, timeoutMs = 60_000) => {
      await waitFor(() => deliveries.length >= n, timeoutMs, 20).catch((err: unknown) => {
        throw new Error(`${name}: ${deliveries.length} of ${n} requests arrived`, { cause: err });
      });
    },
    close: async () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export function endpointOf(r: ChaosReceiver, extra: Partial<EndpointSpec> = {}): EndpointSpec {
  return { name: r.name, url: r.url, secret: r.secret, ...extra };
}

// --- traffic

/** Events through the transactional outbox (`acw_notify_many`, what `notifyMany(db, ...)` runs), committed in batches. */
export async function outboxEvents(pool: pg.Pool, n: number, tag: string, batch = 250): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const events = Array.from({ length: Math.min(batch, n - i) }, (_, k) => ({ topic: 'chaos.event', data: { tag, n: i + k } }));
    const res = await pool.query<{ ids: string[] }>('select acw_notify_many($1::jsonb) as ids', [JSON.stringify(events)]);
    ids.push(...res.rows[0]!.ids);
  }
  return ids;
}

/**
 * POST /v1/notify/batch until accepted, as a client does: the same idempotency keys on every try,
 * so a batch whose answer was lost is not written twice. Resolves with the event ids and the
 * answers of failed tries (status or error name).
 */
export async function notifyBatchUntilAccepted(
  serveUrl: string,
  events: Array<{ topic: string; data: unknown; idempotency_key: string }>,
): Promise<{ ids: string[]; failures: string[] }> {
  const failures: string[] = [];
  for (;;) {
    try {
      const res = await fetch(`${serveUrl}/v1/notify/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKENS.service}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      if (res.status === 200 || res.status === 202) {
        return { ids: (JSON.parse(text) as { results: Array<{ event_id: string }> }).results.map((r) => r.event_id), failures };
      }
      failures.push(String(res.status));
      if (res.status < 500) throw new Error(`notify/batch answered ${res.status}: ${text}`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('notify/batch answered')) throw err;
      failures.push((err as Error).name);
    }
    await sleep(250);
  }
}

// --- the database

export async function count(pool: pg.Pool, sql: string, values: unknown[] = []): Promise<number> {
  return (await pool.query<{ n: number }>(sql, values)).rows[0]!.n;
}

export const runningJobs = (pool: pg.Pool): Promise<number> => count(pool, `select count(*)::int as n from jobs where status = 'running'`);

/** The service processes' LISTEN connections to this database that are listening (their last statement a LISTEN). */
export async function listening(pool: pg.Pool): Promise<number> {
  return count(
    pool,
    `select count(*)::int as n from pg_stat_activity
      where datname = current_database() and application_name = 'acw-webhooks-listener' and state = 'idle' and query ilike 'listen %'`,
  );
}

/** pg_terminate_backend on the service's connections of that kind; resolves with how many. */
export async function terminate(pool: pg.Pool, apps: string[]): Promise<number> {
  const res = await pool.query(
    `select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and application_name = any($1) and pid <> pg_backend_pid()`,
    [apps],
  );
  return res.rowCount ?? 0;
}

// --- an embedded PostgreSQL a scenario can stop and start again on the same port

/** Stop the server whose cluster `<dataDir>/pg` is (fast shutdown, as `pg_ctl stop -m fast`), and wait for it to exit. */
export async function stopPostgres(dataDir: string): Promise<void> {
  const pid = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGINT');
  await waitFor(
    () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    },
    60_000,
    50,
  );
}

/** Start it again on the same port and cluster directory, as the same user; resolves once it accepts connections. */
export async function restartPostgres(
  cluster: string,
  port: number,
  postgresBin: string,
  as: { uid: number; gid: number } | null,
): Promise<void> {
  const child = spawn(
    postgresBin,
    ['-D', cluster, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
    { ...as, detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.unref();
  const { default: pgLib } = await import('pg');
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}: ${stderr.slice(-2000)}`);
      const c = new pgLib.Client({ connectionString: `postgres://postgres:password@127.0.0.1:${port}/postgres` });
      c.on('error', () => undefined);
      try {
        await c.connect();
        await c.query('select 1');
        return true;
      } finally {
        await c.end().catch(() => undefined);
      }
    },
    60_000,
    100,
  );
  // Its log goes on being written: stop reading it, so this process can exit.
  child.stderr.destroy();
}

// --- the checks every scenario ends with

export interface Outcome {
  pool: pg.Pool;
  /** Events whose notify was accepted (a committed outbox write, or a 2xx from the API). */
  accepted: readonly string[];
  /**
   * Every endpoint an accepted event fans out to; `dead`: its jobs are meant to end dead; `held`:
   * they are meant to stay pending, held by the endpoint's open circuit (a probe may be running).
   */
  endpoints: ReadonlyArray<{ receiver: ChaosReceiver; dead?: boolean; held?: boolean }>;
  /** Duplicates allowed: the jobs in flight at the fault(s); a function is asked once the queue settled. */
  maxDuplicates: number | (() => Promise<number>);
  /** How long to wait for the queue to settle. */
  settleMs?: number;
}

export interface OutcomeReport {
  jobs: number;
  requests: number;
  duplicates: number;
  dead: number;
}

/**
 * Wait until every accepted event is dispatched and no job is pending or running, then check:
 * every accepted event delivered at least once with a valid signature, to every endpoint it fans
 * out to; none dead that should not be, none running; duplicates (a job taken by its receiver
 * more than once) at most `maxDuplicates`; each job's attempts on record agree with how it ended
 * (the delivering attempt is its last claim's); one `webhook.dead_letter` audit row and one
 * notification per admin for each dead job, and none for any other.
 */
/** The statuses a job of an endpoint may end in: completed, dead where meant, pending (or its one probe running) where held. */
function expectedStatuses(e: { dead?: boolean; held?: boolean } | undefined): readonly string[] {
  return e?.held ? ['pending', 'running'] : e?.dead ? ['dead'] : ['completed'];
}

export async function checkOutcome(o: Outcome): Promise<OutcomeReport> {
  const { pool } = o;
  const held = o.endpoints.filter((e) => e.held).map((e) => e.receiver.name);
  const statusCounts = async (): Promise<Record<string, number>> =>
    Object.fromEntries(
      (await pool.query<{ status: string; n: number }>('select status, count(*)::int as n from jobs group by 1')).rows.map((r) => [
        r.status,
        r.n,
      ]),
    );
  try {
    await waitFor(
      async () =>
        (await count(pool, 'select count(*)::int as n from events where id = any($1::uuid[]) and dispatched_at is null', [o.accepted])) ===
          0 &&
        (await count(
          pool,
          `select count(*)::int as n from jobs where status in ('pending', 'running') and not (endpoint = any($1::text[]))`,
          [held],
        )) === 0,
      o.settleMs ?? 120_000,
      200,
    );
  } catch (err) {
    throw new Error(`the queue did not settle: jobs by status ${JSON.stringify(await statusCounts())}`, { cause: err });
  }

  const jobs = (
    await pool.query<{ id: string; event_id: string; endpoint: string; status: string }>(
      'select id, event_id, endpoint, status from jobs where event_id = any($1::uuid[])',
      [o.accepted],
    )
  ).rows;
  const byEndpoint = new Map(o.endpoints.map((e) => [e.receiver.name, e]));
  // One job per accepted event and endpoint.
  const pairs = new Set(jobs.map((j) => `${j.event_id}/${j.endpoint}`));
  expect(pairs.size, 'one job per event and endpoint').toBe(jobs.length);
  expect(jobs.length, 'jobs for the accepted events').toBe(o.accepted.length * o.endpoints.length);

  // Status: completed, dead or held (pending, or its endpoint's one probe running) where meant; nothing else left running.
  const wrong = jobs.filter((j) => !expectedStatuses(byEndpoint.get(j.endpoint)).includes(j.status));
  expect(wrong.slice(0, 10), `${wrong.length} jobs in the wrong final status`).toEqual([]);
  const running = await count(pool, `select count(*)::int as n from jobs where status = 'running' and not (endpoint = any($1::text[]))`, [
    held,
  ]);
  expect(running, 'jobs left running').toBe(0);

  // Every delivery signed correctly; every completed job delivered to its receiver for its event.
  let requests = 0;
  let duplicates = 0;
  const perReceiver: Record<string, number> = {};
  for (const { receiver } of o.endpoints) {
    requests += receiver.deliveries.length;
    const invalid = receiver.deliveries.filter((d) => !d.validSignature);
    expect(invalid.length, `${receiver.name}: deliveries with an invalid signature`).toBe(0);
    const seen = new Map<string, { eventId: string | undefined; acked: number }>();
    for (const d of receiver.deliveries) {
      const s = seen.get(d.jobId) ?? { eventId: d.eventId, acked: 0 };
      if (d.acked) s.acked++;
      seen.set(d.jobId, s);
    }
    for (const s of seen.values()) perReceiver[receiver.name] = (perReceiver[receiver.name] ?? 0) + Math.max(0, s.acked - 1);
    duplicates += perReceiver[receiver.name] ?? 0;
    const undelivered = jobs.filter(
      (j) => j.endpoint === receiver.name && j.status === 'completed' && seen.get(j.id)?.eventId !== j.event_id,
    );
    expect(undelivered.length, `${receiver.name}: completed jobs never received with their event`).toBe(0);
  }
  const maxDuplicates = typeof o.maxDuplicates === 'number' ? o.maxDuplicates : await o.maxDuplicates();
  expect(
    duplicates,
    `deliveries taken twice (bound: the jobs in flight at the fault), by receiver ${JSON.stringify(perReceiver)}`,
  ).toBeLessThanOrEqual(maxDuplicates);

  // The record says which attempt delivered each job: exactly one 2xx attempt made under a lease
  // that held (not flagged lease_lost), and it is the job's last claim; a dead job has none. A
  // holder whose lease was lost and handed on must change nothing, however late its write lands.
  const misrecorded = (
    await pool.query<{ id: string; status: string; attempts: number; ok: number[] | null }>(
      `select j.id, j.status, j.attempts, array_agg(a.attempt order by a.attempt) filter (where a.status_code between 200 and 299 and not a.lease_lost) as ok
         from jobs j left join webhook_attempts a on a.job_id = j.id
        where j.status in ('completed', 'dead') and j.type = 'webhook.deliver'
        group by j.id, j.status, j.attempts
       having (j.status = 'completed' and (count(*) filter (where a.status_code between 200 and 299 and not a.lease_lost) <> 1
                 or max(a.attempt) filter (where a.status_code between 200 and 299 and not a.lease_lost) <> j.attempts))
           or (j.status = 'dead' and count(*) filter (where a.status_code between 200 and 299 and not a.lease_lost) > 0)
        limit 10`,
    )
  ).rows;
  expect(misrecorded, 'jobs whose attempts on record disagree with how they ended').toEqual([]);

  // Dead letters: exactly once per dead job, for every admin; none for any other job.
  const dead = (await pool.query<{ id: string }>(`select id from jobs where status = 'dead' order by id`)).rows.map((r) => r.id);
  const audit = (
    await pool.query<{ target_id: string; n: number }>(
      `select target_id, count(*)::int as n from audit_log where action = 'webhook.dead_letter' group by 1 order by 1`,
    )
  ).rows;
  expect(audit, 'one dead_letter audit row per dead job').toEqual(dead.map((id) => ({ target_id: id, n: 1 })));
  const notes = (
    await pool.query<{ job_id: string; admins: string[]; n: number }>(
      `select n.data->>'job_id' as job_id, array_agg(u.name order by u.name) as admins, count(*)::int as n
         from notifications n join users u on u.id = n.user_id
        where n.topic = 'webhook.dead_letter' group by 1 order by 1`,
    )
  ).rows;
  expect(notes, 'one dead_letter notification per admin per dead job').toEqual(
    dead.map((id) => ({ job_id: id, admins: ADMINS.toSorted(), n: ADMINS.length })),
  );
  return { jobs: jobs.length, requests, duplicates, dead: dead.length };
}

/** One line per scenario in the run's output: what it did and how long it took. */
export function report(name: string, startedAt: number, facts: Record<string, unknown>): void {
  console.log(`[chaos] ${name}: ${JSON.stringify({ ...facts, seconds: Math.round((Date.now() - startedAt) / 100) / 10, scale: SCALE })}`);
}
