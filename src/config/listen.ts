/** `HOST:PORT` as used by `server.listen` and `--listen`. */

export interface ListenAddress {
  /** Without brackets, as `net.Server#listen` wants it: `127.0.0.1`, `::1`, `localhost`. */
  readonly host: string;
  readonly port: number;
}

const HOST_PORT = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/;

/** Parses `127.0.0.1:8080`, `localhost:0`, `[::1]:8080`; throws on anything else. */
export function parseListen(s: string): ListenAddress {
  const m = typeof s === 'string' ? HOST_PORT.exec(s) : null;
  const port = Number(m?.[3]);
  const host = m?.[1] ?? m?.[2];
  if (!m || host === undefined || !(port >= 0 && port <= 65535)) {
    throw new RangeError(`expected HOST:PORT like "127.0.0.1:8080" (port 0-65535), got ${JSON.stringify(s)}`);
  }
  return { host, port };
}
