import { createServer, connect, type Socket } from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL, to make a real database outage: `cut(ms)` drops every
 * connection and refuses new ones for that long; `down()` does the same until `up()`; `refuse()`
 * only refuses new ones (until `up()`), so that a connection killed on the server stays down.
 * `hold()` keeps the server's answers back (the statements still run) until `release()`: a query
 * that has done its work but not yet returned. `attempts` counts the connections tried, refused or not.
 */
export async function startProxy(target: { host: string; port: number }): Promise<{
  port: number;
  cut(ms: number): Promise<void>;
  down(): void;
  refuse(): void;
  up(): void;
  /** When each connection attempt arrived (performance.now()), refused ones included. */
  attempts: number[];
  hold(): void;
  release(): void;
  close(): Promise<void>;
}> {
  const sockets = new Set<Socket>();
  let down = false;
  let held: Array<() => void> | null = null;
  const attempts: number[] = [];
  const server = createServer((client) => {
    attempts.push(performance.now());
    if (down) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (held) held.push(() => client.write(chunk));
      else client.write(chunk);
    });
  });
  const goDown = (): void => {
    down = true;
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  if (!addr || typeof addr !== 'object') throw new Error('proxy did not bind');
  return {
    port: addr.port,
    attempts,
    cut: async (ms) => {
      goDown();
      await new Promise((r) => setTimeout(r, ms));
      down = false;
    },
    down: goDown,
    refuse: () => {
      down = true;
    },
    up: () => {
      down = false;
    },
    hold: () => {
      held ??= [];
    },
    release: () => {
      const queued = held ?? [];
      held = null;
      for (const send of queued) send();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
