// The process's one LISTEN connection (src/db/listen-hub.ts), against real PostgreSQL: channels
// multiplexed over it, UNLISTEN when a channel's last subscriber leaves, and a reconnect that
// LISTENs every channel again and tells every subscriber once.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ListenHub, LISTENER_APP, type ListenSubscriber } from '../../src/db/listen-hub.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureLogs, waitFor, type LogLine } from '../helpers/logs.js';
import { startProxy } from '../helpers/proxy.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());
const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closing.splice(0).toReversed()) await c();
});

const A = 'public.t_a';
const B = 'public.t_b';
const C = 'public.t_c';

function hubFor(
  url = db.url,
  log = captureLogs(),
  delays: { minDelayMs?: number; maxDelayMs?: number } = {},
): { hub: ListenHub; events: (name: string) => LogLine[] } {
  const hub = new ListenHub({ url, log: log.log, ...delays });
  closing.push(() => hub.close());
  return { hub, events: log.events };
}

/** A subscriber that keeps what it hears. */
function recorder(): ListenSubscriber & { heard: Array<string | undefined>; reconnects: number } {
  const r = {
    heard: [] as Array<string | undefined>,
    reconnects: 0,
    onNotify: (payload: string | undefined) => void r.heard.push(payload),
    onReconnect: () => void r.reconnects++,
  };
  return r;
}

/** The backends of LISTEN connections to this test's database. */
async function listenerPids(): Promise<number[]> {
  const res = await db.pool.query<{ pid: number }>(
    `select pid from pg_stat_activity where application_name = $1 and datname = current_database()`,
    [LISTENER_APP],
  );
  return res.rows.map((r) => r.pid);
}

/** The channels the hub's backend LISTENs to, as pg_listening_channels() on it says; null while down. */
const channelsOf = async (hub: ListenHub): Promise<string[] | null> => (await hub.listening())?.channels ?? null;

const notify = (ch: string, payload: string) => db.pool.query(`select pg_notify($1, $2)`, [ch, payload]);

describe('ListenHub', () => {
  it('multiplexes every channel over one connection, each subscriber hearing its own channel', async () => {
    const { hub } = hubFor();
    const [a1, a2, b, c] = [recorder(), recorder(), recorder(), recorder()];
    await hub.subscribe(A, a1);
    await hub.subscribe(A, a2);
    await hub.subscribe(B, b);
    await hub.subscribe(C, c);
    expect(await listenerPids()).toHaveLength(1);
    expect(await channelsOf(hub)).toEqual([A, B, C]);
    await notify(A, 'to-a');
    await notify(C, 'to-c');
    await waitFor(() => a1.heard.length === 1 && a2.heard.length === 1 && c.heard.length === 1);
    expect([a1.heard, a2.heard, b.heard, c.heard]).toEqual([['to-a'], ['to-a'], [], ['to-c']]);
    expect(hub.isConnected).toBe(true);
  });

  it('UNLISTENs a channel when its last subscriber leaves, not before', async () => {
    const { hub } = hubFor();
    const [a1, a2, b] = [recorder(), recorder(), recorder()];
    const s1 = await hub.subscribe(A, a1);
    const s2 = await hub.subscribe(A, a2);
    await hub.subscribe(B, b);
    await s1.close();
    expect(await channelsOf(hub)).toEqual([A, B]);
    await notify(A, 'still');
    await waitFor(() => a2.heard.length === 1);
    expect(a1.heard).toEqual([]);
    await s2.close();
    expect(await channelsOf(hub)).toEqual([B]);
    // Closing again changes nothing; subscribing again LISTENs again.
    await s2.close();
    await hub.subscribe(A, a1);
    expect(await channelsOf(hub)).toEqual([A, B]);
    expect(await listenerPids()).toHaveLength(1);
  });

  it('a reconnect LISTENs every channel again and calls every subscriber onReconnect once; the loss is logged once', async () => {
    const { hub, events } = hubFor();
    const subs = { a1: recorder(), a2: recorder(), b: recorder(), c: recorder() };
    await hub.subscribe(A, subs.a1);
    await hub.subscribe(A, subs.a2);
    await hub.subscribe(B, subs.b);
    await hub.subscribe(C, subs.c);
    const [old] = await listenerPids();
    await db.pool.query(`select pg_terminate_backend($1)`, [old]);
    await waitFor(() => Object.values(subs).every((s) => s.reconnects > 0));
    const now = await listenerPids();
    expect(now).toHaveLength(1);
    expect(now).not.toContain(old);
    expect(await channelsOf(hub)).toEqual([A, B, C]);
    // Every channel heard again; by then every onReconnect call there was to be has been made.
    await notify(A, 'a');
    await notify(B, 'b');
    await notify(C, 'c');
    await waitFor(() => Object.values(subs).every((s) => s.heard.length === 1));
    expect(Object.values(subs).map((s) => s.reconnects)).toEqual([1, 1, 1, 1]);
    expect(events('db.listener_lost')).toHaveLength(1);
    expect(events('db.listener_back')).toHaveLength(1);
  });

  it('subscribing while the database is unreachable resolves at once; the subscriber is told when the connection is up', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    closing.push(() => proxy.close());
    proxy.down();
    u.host = `127.0.0.1:${proxy.port}`;
    const { hub, events } = hubFor(u.toString());
    const a = recorder();
    await hub.subscribe(A, a);
    expect(hub.isConnected).toBe(false);
    expect(await channelsOf(hub)).toBeNull();
    // Some retries fail before the proxy comes up: they are part of the same loss.
    await waitFor(() => events('db.listener_retry_failed').length >= 2);
    proxy.up();
    await waitFor(() => a.reconnects === 1);
    expect(hub.isConnected).toBe(true);
    expect(await channelsOf(hub)).toEqual([A]);
    await notify(A, 'up');
    await waitFor(() => a.heard.length === 1);
    expect(events('db.listener_lost')).toHaveLength(1);
    expect(a.reconnects).toBe(1);
  });

  it('retries with a back-off that doubles up to its cap, and starts over once connected', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    closing.push(() => proxy.close());
    proxy.down();
    u.host = `127.0.0.1:${proxy.port}`;
    const { hub, events } = hubFor(u.toString(), captureLogs(), { minDelayMs: 20, maxDelayMs: 160 });
    const a = recorder();
    await hub.subscribe(A, a);
    await waitFor(() => events('db.listener_retry_failed').length >= 5);
    proxy.up();
    await waitFor(() => a.reconnects === 1);
    const waits = [...events('db.listener_lost'), ...events('db.listener_retry_failed')].map((l) => l['retry_in_ms']);
    expect(waits.slice(0, 6)).toEqual([20, 40, 80, 160, 160, 160]);
    // And the attempts really were that far apart (a lower bound only: a busy machine is slower).
    const gaps = proxy.attempts.slice(1, 6).map((t, i) => t - proxy.attempts[i]!);
    gaps.forEach((g, i) => expect(g).toBeGreaterThanOrEqual([20, 40, 80, 160, 160][i]! - 2));
    // Connected: the next loss waits the shortest again.
    const [pid] = await listenerPids();
    await db.pool.query(`select pg_terminate_backend($1)`, [pid]);
    await waitFor(() => a.reconnects === 2);
    expect(events('db.listener_lost').map((l) => l['retry_in_ms'])).toEqual([20, 20]);
  });

  it('close() while a connect is under way leaves no connection behind', async () => {
    const u = new URL(db.url);
    const proxy = await startProxy({ host: u.hostname, port: Number(u.port) });
    closing.push(() => proxy.close());
    // The server's answers are held back: the connect hangs half-way.
    proxy.hold();
    u.host = `127.0.0.1:${proxy.port}`;
    const { hub } = hubFor(u.toString());
    const subscribed = hub.subscribe(A, recorder());
    await waitFor(() => proxy.attempts.length === 1);
    await hub.close();
    proxy.release();
    await subscribed;
    await waitFor(async () => (await listenerPids()).length === 0);
    expect(await channelsOf(hub)).toBeNull();
  });

  it('close() ends the connection; a subscription after it opens none', async () => {
    const { hub } = hubFor();
    await hub.subscribe(A, recorder());
    expect(await listenerPids()).toHaveLength(1);
    await hub.close();
    await waitFor(async () => (await listenerPids()).length === 0);
    const late = await hub.subscribe(B, recorder());
    expect(await channelsOf(hub)).toBeNull();
    await late.close();
    expect(await listenerPids()).toHaveLength(0);
  });

  it('a subscriber that throws does not keep the others of its channel from hearing', async () => {
    const log = captureLogs();
    const { hub } = hubFor(db.url, log);
    const ok = recorder();
    await hub.subscribe(A, {
      onNotify: () => {
        throw new Error('subscriber bug');
      },
      onReconnect: () => undefined,
    });
    await hub.subscribe(A, ok);
    await notify(A, 'x');
    await waitFor(() => ok.heard.length === 1);
    expect(log.events('db.listener_subscriber_error')).toHaveLength(1);
  });
});
